package io.gpumem.testing;

/**
 * Binary byte units for tests, declared once for every module's tests (they reach it through gpumem-core's
 * test-jar): {@code 3 * MiB} reads as the spec writes it.
 */
public final class TestSizes {
    public static final long KiB = 1L << 10;
    public static final long MiB = 1L << 20;
    public static final long GiB = 1L << 30;

    private TestSizes() {}
}
