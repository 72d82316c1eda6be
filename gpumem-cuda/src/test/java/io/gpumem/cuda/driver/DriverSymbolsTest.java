package io.gpumem.cuda.driver;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.cuda.fake.FakeCuda;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The bindings use the driver's exported, versioned symbols, and the fake driver exports every one of them
 * (checked with {@code nm -D}, as on a real libcuda).
 */
class DriverSymbolsTest {

    private static Set<String> exportedByFake() throws IOException, InterruptedException {
        Process nm = new ProcessBuilder("nm", "-D", "--defined-only", FakeCuda.LIBRARY.toString())
                .redirectErrorStream(true)
                .start();
        String out = new String(nm.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(nm.waitFor()).as("nm output: %s", out).isZero();
        return out.lines()
                .map(l -> l.trim().split("\\s+"))
                .filter(f -> f.length == 3 && f[1].equals("T"))
                .map(f -> f[2])
                .collect(Collectors.toSet());
    }

    @Test
    void nmListsEverySymbolTheBindingsUse() throws Exception {
        Set<String> exported = exportedByFake();
        assertThat(CudaDriver.SYMBOLS).hasSizeGreaterThan(35).doesNotHaveDuplicates();
        assertThat(exported).containsAll(CudaDriver.SYMBOLS);
        // The fake also carries the legacy 32-bit export, so binding it by mistake would be caught.
        assertThat(exported).contains("cuMemAlloc", "cuMemFree", "cuMemGetInfo");
    }

    @Test
    void bindingsUseVersionedExportsWhereCudaHeaderRenamesThem() {
        assertThat(CudaDriver.SYMBOLS)
                .contains(
                        "cuMemAlloc_v2",
                        "cuMemFree_v2",
                        "cuMemGetInfo_v2",
                        "cuDeviceTotalMem_v2",
                        "cuDevicePrimaryCtxRelease_v2",
                        "cuStreamDestroy_v2",
                        "cuEventDestroy_v2",
                        "cuMemcpyHtoD_v2",
                        "cuMemcpyDtoH_v2",
                        "cuMemcpyDtoD_v2");
        assertThat(CudaDriver.SYMBOLS)
                .doesNotContain(
                        "cuMemAlloc",
                        "cuMemFree",
                        "cuMemGetInfo",
                        "cuDeviceTotalMem",
                        "cuDevicePrimaryCtxRelease",
                        "cuStreamDestroy",
                        "cuEventDestroy",
                        "cuMemcpyHtoD",
                        "cuMemcpyDtoH",
                        "cuMemcpyDtoD",
                        "cuCtxCreate");
        assertThat(CudaDriver.SYMBOLS)
                .contains(
                        "cuMemAddressReserve",
                        "cuMemAddressFree",
                        "cuMemCreate",
                        "cuMemRelease",
                        "cuMemMap",
                        "cuMemUnmap",
                        "cuMemSetAccess",
                        "cuMemGetAllocationGranularity",
                        "cuMemHostAlloc",
                        "cuMemFreeHost",
                        "cuGetErrorName",
                        "cuDevicePrimaryCtxRetain");
    }

    @Test
    @SuppressWarnings("restricted")
    void theLegacyUnversionedExportFailsLoudly() throws Throwable {
        MethodHandle legacy = Linker.nativeLinker()
                .downcallHandle(
                        SymbolLookup.libraryLookup(FakeCuda.LIBRARY, Arena.global())
                                .findOrThrow("cuMemAlloc"),
                        FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
        try (Arena arena = Arena.ofConfined()) {
            int rc = (int) legacy.invokeExact(arena.allocate(8), 4096);
            assertThat(rc).isEqualTo(801); // CUDA_ERROR_NOT_SUPPORTED
        }
    }

    @Test
    void aLibraryWithoutTheSymbolsIsReportedByName() {
        // libc loads fine but exports no CUDA function: the library and its first missing symbol are named.
        assertThatThrownBy(() -> CudaDriver.load("libc.so.6"))
                .isInstanceOf(CudaUnavailableException.class)
                .hasMessageContaining("'libc.so.6' does not export cuInit");
    }

    @Test
    void aMissingLibraryIsReportedWithTheWayToConfigureIt() {
        assertThatThrownBy(() -> CudaDriver.load("/nonexistent/libcuda.so.1"))
                .isInstanceOf(CudaUnavailableException.class)
                .hasMessageContaining("/nonexistent/libcuda.so.1")
                .hasMessageContaining("gpumem.cuda.library");
    }

    @Test
    void errorNamesComeFromTheDriver() {
        CudaDriver driver = CudaDriver.load(FakeCuda.LIBRARY.toString());
        assertThat(driver.errorName(1)).isEqualTo("CUDA_ERROR_INVALID_VALUE");
        assertThat(driver.errorName(2)).isEqualTo("CUDA_ERROR_OUT_OF_MEMORY");
        assertThat(driver.errorName(12345)).isEqualTo("CUresult 12345");
        assertThat(driver.errorString(2)).isEqualTo("out of memory");
    }
}
