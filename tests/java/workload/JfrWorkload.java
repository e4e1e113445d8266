/*
 * The Java source's ground truth (tests/java, docs/java.md): a program whose profile is known.
 *
 *   CPU    one thread spins 3 ms in hotMethod, then 1 ms in coldMethod, by the clock: 3:1 wall
 *          time in Java code, which is what jdk.ExecutionSample samples (threads in Java, on a
 *          CPU or not), so the split holds on a loaded machine too.
 *   alloc  two threads, one per site: allocBig allocates byte[4096] and allocSmall byte[512],
 *          each counting the bytes it allocated (array header + length, 8-byte aligned). One
 *          thread per site, because jdk.ObjectAllocationSample's weight is what the thread
 *          allocated since its last sample, at whatever site: a thread alternating sites would
 *          bias the split toward the site that refills TLABs more often.
 *   lock   four threads take one monitor in contendedMethod and hold it 4 ms (sleeping): the
 *          others wait on monitor entry (jdk.JavaMonitorEnter); two more contend on a
 *          ReentrantLock in parkedMethod (jdk.ThreadPark).
 *
 * Usage: java JfrWorkload SECONDS. Prints "cpu hot=NS cold=NS", "alloc big=N small=N" and
 * "done" at the end.
 */
import java.util.concurrent.locks.ReentrantLock;

public final class JfrWorkload {
    static final Object MONITOR = new Object();
    static final ReentrantLock LOCK = new ReentrantLock();
    static volatile boolean stop;
    static volatile long sink;
    static volatile Object keep;

    // Arrays of bytes: a 16-byte header (compressed class pointers, the default on 64-bit
    // HotSpot) and the elements, rounded up to 8.
    static long arrayBytes(int len) {
        return (16 + len + 7) & ~7L;
    }

    static long spin(long nanos, long acc) {
        long end = System.nanoTime() + nanos;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 200; i++) {
                acc = acc * 6364136223846793005L + 1442695040888963407L;
            }
        }
        return acc;
    }

    static long hotMethod(long acc) {
        return spin(3_000_000, acc);
    }

    static long coldMethod(long acc) {
        return spin(1_000_000, acc);
    }

    // The time each method took, by the same clock: the CPU split's truth.
    static long hotNanos, coldNanos;

    static void cpuLoop() {
        long acc = 1;
        while (!stop) {
            long t0 = System.nanoTime();
            acc = hotMethod(acc);
            long t1 = System.nanoTime();
            acc = coldMethod(acc);
            hotNanos += t1 - t0;
            coldNanos += System.nanoTime() - t1;
        }
        sink = acc;
    }

    static long allocBig() {
        byte[] b = new byte[4096];
        keep = b;
        return arrayBytes(b.length);
    }

    static long allocSmall() {
        byte[] b = new byte[512];
        keep = b;
        return arrayBytes(b.length);
    }

    // Bursts of about 0.5 MB (big) and 0.27 MB (small) a millisecond: enough samples, few GCs.
    static long allocLoop(boolean bigSite) {
        long n = 0;
        while (!stop) {
            for (int i = 0; i < 128; i++) {
                n += bigSite ? allocBig() : allocSmall() + allocSmall() + allocSmall() + allocSmall();
            }
            try {
                Thread.sleep(1);
            } catch (InterruptedException e) {
                break;
            }
        }
        return n;
    }

    static void contendedMethod() throws InterruptedException {
        synchronized (MONITOR) {
            Thread.sleep(4);
        }
    }

    static void parkedMethod() throws InterruptedException {
        LOCK.lock();
        try {
            Thread.sleep(4);
        } finally {
            LOCK.unlock();
        }
    }

    interface Body {
        void run() throws InterruptedException;
    }

    static Thread start(String name, Body body) {
        Thread t = new Thread(() -> {
            try {
                while (!stop) {
                    body.run();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, name);
        t.start();
        return t;
    }

    public static void main(String[] args) throws Exception {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : 5;
        final long[] big = new long[1];
        final long[] small = new long[1];
        Thread[] ts = {
            new Thread(JfrWorkload::cpuLoop, "cpu"),
            new Thread(() -> big[0] = allocLoop(true), "alloc-big"),
            new Thread(() -> small[0] = allocLoop(false), "alloc-small"),
        };
        for (Thread t : ts) {
            t.start();
        }
        Thread[] lockers = new Thread[6];
        for (int i = 0; i < 4; i++) {
            lockers[i] = start("monitor-" + i, JfrWorkload::contendedMethod);
        }
        for (int i = 4; i < 6; i++) {
            lockers[i] = start("park-" + i, JfrWorkload::parkedMethod);
        }
        Thread.sleep(seconds * 1000);
        stop = true;
        for (Thread t : ts) {
            t.join();
        }
        for (Thread t : lockers) {
            t.join();
        }
        System.out.println("cpu hot=" + hotNanos + " cold=" + coldNanos);
        System.out.println("alloc big=" + big[0] + " small=" + small[0]);
        System.out.println("done");
    }
}
