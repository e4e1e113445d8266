"""What bench_spinner's file says about the time taken from the workload in interrupts, and how
much of it one sampling profiler took (see bench_spinner.c for the file's layout).

A profiler's sampling interrupt comes once a period on every CPU, at a fixed phase: added up by
start time modulo that period, its gaps pile up in a few bins while other interrupts (the
scheduler tick excepted, which also has a fixed phase at 100 Hz) spread over all of them. The
pile's excess over the median bin is the profiler's: its number, and the time the workload lost
to it. That time includes what the BPF statistics count (the programs' run time), what they do
not (the interrupt itself, which on a VM is most of it) and perf's stack walks, which no CPU
figure of the perf process shows."""
import statistics
import struct

WINDOW_BINS = 8  # 16 us: a sampling interrupt starts within a few us of its phase


def read(path):
    """(counters, {period_ns: (counts, ns)}) of one spinner's file."""
    with open(path, "rb") as f:
        data = f.read()
    v = struct.unpack("<%dQ" % (len(data) // 8), data[:len(data) // 8 * 8])
    hists, off = {}, 8
    for _ in range(v[6]):
        period, nbins = v[off], v[off + 1]
        hists[period] = (v[off + 2:off + 2 + nbins], v[off + 2 + nbins:off + 2 + 2 * nbins])
        off += 2 + 2 * nbins
    return v[:8], hists


def work_units(snap):
    return sum(c[0] for c, _ in snap)


def fold(before, after, period_ns):
    """Per spinner, the gaps between two snapshots (lists of read() per spinner) by phase of
    period_ns: (counts, ns) per bin, the last (shorter) bin left out. None if not folded."""
    out = []
    for (_, hb), (_, ha) in zip(before, after):
        if period_ns not in ha:
            return None
        counts = [y - x for x, y in zip(hb[period_ns][0], ha[period_ns][0])][:-1]
        ns = [y - x for x, y in zip(hb[period_ns][1], ha[period_ns][1])][:-1]
        out.append((counts, ns))
    return out


def window_sums(values):
    nb = len(values)
    return [sum(values[(i + k) % nb] for k in range(WINDOW_BINS)) for i in range(nb)]


def peak(counts, taken=()):
    """First bin of the window of WINDOW_BINS bins holding most gaps, among the windows that do
    not overlap a window starting at a bin of taken."""
    nb = len(counts)
    win = window_sums(counts)

    def free(i):
        return all(min((i - t) % nb, (t - i) % nb) >= WINDOW_BINS for t in taken)
    return max((i for i in range(nb) if free(i)), key=win.__getitem__)


def excess_at(counts, ns, start):
    """(number, ns) of the gaps in the window at start beyond the median bin's."""
    nb = len(counts)
    n = sum(counts[(start + k) % nb] for k in range(WINDOW_BINS))
    t = sum(ns[(start + k) % nb] for k in range(WINDOW_BINS))
    return (n - WINDOW_BINS * statistics.median(counts),
            t - WINDOW_BINS * statistics.median(ns))


def sampler_excess(before, after, period_ns):
    """Gaps of a sampler at period_ns between two snapshots (lists of read() per spinner):
    (number, ns) summed over the spinners, in excess of the background."""
    folded = fold(before, after, period_ns)
    if folded is None:
        return 0.0, 0.0
    total_n = total_ns = 0.0
    for counts, ns in folded:
        n, t = excess_at(counts, ns, peak(counts))
        total_n += n
        total_ns += t
    return total_n, total_ns
