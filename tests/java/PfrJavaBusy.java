// A small busy JVM for the attach tests: CPU in a loop, allocations, and two threads that
// contend on one monitor, so each of pfr's events has something to record. Prints "ready"
// once its threads run.
public class PfrJavaBusy {
    static final Object lock = new Object();
    static volatile long sink;

    static void spin() {
        long x = 0;
        for (int i = 0; i < 2_000_000; i++)
            x += i * 31L;
        sink += x;
    }

    static void contend() {
        synchronized (lock) {
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    public static void main(String[] args) throws Exception {
        for (int t = 0; t < 2; t++) {
            Thread th = new Thread(() -> {
                while (true)
                    contend();
            });
            th.setDaemon(true);
            th.start();
        }
        System.out.println("ready");
        System.out.flush();
        while (true) {
            spin();
            sink += new byte[4096].length;
            Thread.sleep(2);
        }
    }
}
