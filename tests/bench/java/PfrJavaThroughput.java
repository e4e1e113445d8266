// The Java bench's workload (bench_java.py, docs/benchmarks.md): THREADS threads each repeat one
// operation that mixes what pfr's Flight Recorder recording samples: CPU (a hash over an array),
// allocation (a short-lived array and a boxed map entry, so the young collector runs), and a
// monitor shared by all threads (held briefly, so it is contended without stalling everyone).
// Every 250 ms it prints "ops MILLIS COUNT": the monotonic clock and the operations done since
// the start, so the bench can take the throughput of any window of its own choosing.
//
// Usage: java PfrJavaThroughput THREADS TAG (TAG only marks the command line).
import java.util.HashMap;
import java.util.concurrent.atomic.LongAdder;

public final class PfrJavaThroughput {
    static final Object MONITOR = new Object();
    static final LongAdder OPS = new LongAdder();
    static long shared;
    static volatile long sink;

    static long hash(int[] a, long seed) {
        long h = seed;
        for (int round = 0; round < 8; round++)
            for (int v : a)
                h = (h ^ v) * 0x100000001b3L;
        return h;
    }

    static void worker(int id) {
        HashMap<Integer, int[]> recent = new HashMap<>();
        long seed = id;
        for (int i = 0;; i++) {
            int[] a = new int[64 + (i & 63)];
            for (int j = 0; j < a.length; j++)
                a[j] = j * id + i;
            seed = hash(a, seed);
            recent.put(i & 1023, a);
            synchronized (MONITOR) {
                shared += seed & 7;
            }
            OPS.increment();
            if ((i & 4095) == 0)
                sink += recent.size() + seed;
        }
    }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        for (int t = 0; t < threads; t++) {
            final int id = t + 1;
            Thread th = new Thread(() -> worker(id), "worker-" + id);
            th.setDaemon(true);
            th.start();
        }
        long t0 = System.nanoTime();
        while (true) {
            System.out.println("ops " + (System.nanoTime() - t0) / 1_000_000 + " " + OPS.sum());
            System.out.flush();
            Thread.sleep(250);
        }
    }
}
