package io.gpumem.engine;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.Device;
import io.gpumem.plan.LifetimeProblem;
import io.gpumem.plan.OffsetPlan;
import io.gpumem.plan.OffsetPlanner;
import io.gpumem.policy.PlannedAllocator;
import io.gpumem.policy.PolicySpec;
import io.gpumem.policy.StitchAllocator;
import java.util.Arrays;

/**
 * The {@link AllocatorFactory} of a policy or configuration. Interim: the policy registry (issue 18) replaces
 * {@link #of(PolicySpec)}; until then this is the one place that maps a policy name to its class.
 *
 * <p>{@code planned} plans from the stream it runs: a stream with steps (a generated training loop) is profiled
 * over its first step and served by plan from then on, as a job using it would; a stream without (a trace window)
 * is planned from its lifetimes (start blocks live from time 0, each alloc from its op index to the op that frees
 * it, or to the end; request k of the replay is expected at plan position k), once per factory and stream.
 */
public final class Policies {

    private Policies() {
    }

    /** The PyTorch-exact caching allocator under {@code config}. */
    public static AllocatorFactory exact(AllocatorConfig config) {
        return (device, stream) -> new CachingAllocator(device, config);
    }

    /** The allocator {@code spec} names. */
    public static AllocatorFactory of(PolicySpec spec) {
        return switch (spec.name()) {
            case "pytorch" -> exact(AllocatorConfig.parse(spec.options()));
            case "stitch" -> (device, stream) -> new StitchAllocator(device);
            case "planned" -> new Planned();
            default -> throw new IllegalArgumentException("unknown policy " + spec.name());
        };
    }

    /** {@code planned}: the plan of a stream without steps is made on first use and kept for later runs. */
    private static final class Planned implements AllocatorFactory {
        private RequestStream planned;
        private long[] sizes;
        private long[] offsets;

        @Override
        public synchronized PlannedAllocator create(Device device, RequestStream stream) {
            if (stream.steps() > 0) {
                return PlannedAllocator.profiling(device, 1);
            }
            if (planned != stream) {
                plan(stream);
            }
            return new PlannedAllocator(device, sizes, offsets);
        }

        private void plan(RequestStream rs) {
            int n = rs.slots;
            long[] lower = new long[n];
            long[] upper = new long[n];
            long[] size = new long[n];
            long[] id = new long[n];
            int[] slot = {0};
            RequestStream.forEachLiveBlock(rs.startState(), (seg, b) -> size[slot[0]++] = b.size());
            Arrays.fill(upper, rs.length + 1L);
            for (int k = 0; k < rs.length; k++) {
                if (rs.op[k] == RequestStream.ALLOC) {
                    lower[rs.slot[k]] = k + 1L;
                    size[rs.slot[k]] = Math.max(1, rs.size[k]);
                } else if (rs.op[k] == RequestStream.FREE) {
                    upper[rs.slot[k]] = k + 1L;
                }
            }
            for (int i = 0; i < n; i++) {
                id[i] = i;
            }
            LifetimeProblem p = new LifetimeProblem(id, lower, upper, size, 512);
            OffsetPlan plan = new OffsetPlanner().plan(p);
            sizes = new long[n];
            for (int i = 0; i < n; i++) {
                sizes[i] = p.placedSize(i);
            }
            offsets = plan.offsets();
            planned = rs;
        }
    }
}
