package io.gpumem.spill;

/**
 * An immutable snapshot of a {@link SpillingAllocator}'s spill counters.
 *
 * @param oomRetries allocations that hit out-of-memory, spilled and retried
 * @param spillsToHost buffers moved from the device to host memory
 * @param spillsToDisk buffers moved from the device to a disk file (host budget spent)
 * @param bytesToHost bytes of those host spills
 * @param bytesToDisk bytes of those disk spills
 * @param unspills buffers brought back to the device on access
 * @param bytesUnspilled bytes of those
 * @param spillNanos wall time spent spilling (copies, file writes, device frees)
 * @param unspillNanos wall time spent bringing buffers back
 */
public record SpillStats(
        long oomRetries,
        long spillsToHost,
        long spillsToDisk,
        long bytesToHost,
        long bytesToDisk,
        long unspills,
        long bytesUnspilled,
        long spillNanos,
        long unspillNanos) {

    public long spills() {
        return spillsToHost + spillsToDisk;
    }
}
