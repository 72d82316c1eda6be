/*
 * fakecuda: a stand-in for libcuda.so.1 with the same ABI, for testing gpumem's FFM bindings on
 * machines without an NVIDIA GPU.
 *
 * Design
 * ------
 * "Device memory" is host memory, so bytes written through a device address really read back:
 *   cuMemAlloc_v2        -> anonymous mmap (read/write), counted against a configurable total
 *   cuMemAddressReserve  -> mmap PROT_NONE (address space only)
 *   cuMemCreate          -> memfd_create + ftruncate; the handle names a table entry (fd, size)
 *   cuMemMap             -> mmap(MAP_SHARED | MAP_FIXED) of the memfd inside a reservation, PROT_NONE
 *   cuMemSetAccess       -> mprotect(PROT_READ | PROT_WRITE)
 *   cuMemUnmap           -> mmap PROT_NONE anonymous MAP_FIXED over the range (back to "reserved")
 *   cuMemRelease         -> close(fd); the pages live on while mapped, as on a GPU
 * Touching unmapped or not-yet-accessible memory segfaults, so use-before-access bugs crash tests.
 *
 * The driver's rules are enforced and reported with the driver's error codes: cuInit first, a current
 * context for memory/stream/event calls, granularity multiples, flags == 0, allocation properties
 * (pinned, device location, valid ordinal), unmap of whole earlier mappings only, access set before
 * copies, no double free/release, address ranges freed with their exact reserved size and nothing
 * mapped.
 *
 * Contexts: the one device's primary context is retained and released by count; the release that drops the count
 * to 0 destroys it and frees everything allocated in it (device and pinned host memory, reservations, handles,
 * mappings, streams and events), as the real driver does.
 *
 * Streams and events: every cuEventRecord enqueues one unit of work on its stream; an event completes
 * once its stream's completed count reaches the event's ticket. By default work completes at once;
 * fakecuda_hold_events(1) holds it back until fakecuda_complete_stream / a synchronize call.
 *
 * The legacy unversioned exports (cuMemAlloc, cuMemFree, cuMemGetInfo) take 32-bit sizes in the real
 * driver; here they always fail, so a binding to the wrong symbol fails loudly.
 *
 * Control API (exported, prefix fakecuda_): reset, totals, granularity, VMM support, fault injection
 * (fail the Nth call of a named function), a delay for one named function (to widen races), per-function
 * call counters, event completion, byte counts.
 *
 * One global mutex guards all state; no function calls another exported function while holding it.
 * No NVIDIA header is used: the few types and constants needed are declared below.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------------ driver types and constants */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct fake_context *CUcontext;
typedef void *CUstream;
typedef void *CUevent;

typedef struct {
    int type; /* 1 = device */
    int id;
} MemLocation;

typedef struct {
    int type;                 /* 1 = pinned */
    int requestedHandleTypes; /* 0 = none */
    MemLocation location;
    void *win32HandleMetaData;
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
} MemAllocationProp;

typedef struct {
    MemLocation location;
    int flags; /* 0 none, 1 read, 3 read-write */
} MemAccessDesc;

_Static_assert(sizeof(MemAllocationProp) == 32, "CUmemAllocationProp is 32 bytes");
_Static_assert(offsetof(MemAllocationProp, win32HandleMetaData) == 16, "win32HandleMetaData at 16");
_Static_assert(offsetof(MemAllocationProp, usage) == 26, "allocFlags.usage at 26");
_Static_assert(sizeof(MemAccessDesc) == 12, "CUmemAccessDesc is 12 bytes");

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_UNKNOWN = 999
};

#define ATTR_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED 102
#define ATTR_MEMORY_POOLS_SUPPORTED 115
#define ATTR_MAX 150
#define DEVICE_COUNT 1
#define DEFAULT_TOTAL (8ULL << 30)
#define DEFAULT_GRANULARITY (2ULL << 20)
#define STREAM_BASE 0x5a000000ULL
#define EVENT_BASE 0x5e000000ULL

/* ------------------------------------------------------------------ state */

typedef struct { uintptr_t base; size_t size; } Range;
typedef struct { CUmemGenericAllocationHandle id; int fd; size_t size; int released; int maps; } Handle;
typedef struct { uintptr_t addr; size_t size; CUmemGenericAllocationHandle handle; int prot; } Mapping;
typedef struct { int alive; unsigned long long enqueued, completed; } Stream;
typedef struct { int alive; int recorded; size_t stream; unsigned long long ticket; } Event;
typedef struct { const char *name; long long count; } Counter;
typedef struct { char name[64]; long long remaining; CUresult rc; } Injection;
struct fake_context { int device; int refs; };

#define DEFINE_VEC(T, name) static T *name; static size_t name##_len, name##_cap;
DEFINE_VEC(Range, g_allocs)       /* cuMemAlloc_v2 allocations */
DEFINE_VEC(Range, g_host)         /* cuMemHostAlloc allocations */
DEFINE_VEC(Range, g_reserves)     /* cuMemAddressReserve ranges */
DEFINE_VEC(Handle, g_handles)     /* cuMemCreate handles (released ones stay until unmapped) */
DEFINE_VEC(Mapping, g_maps)       /* cuMemMap mappings */
DEFINE_VEC(Stream, g_streams)     /* index 0 is the legacy default stream */
DEFINE_VEC(Event, g_events)
DEFINE_VEC(Counter, g_counters)
DEFINE_VEC(Injection, g_injections)

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_context g_ctx[DEVICE_COUNT];
static __thread struct fake_context *tl_current;
static int g_initialized;
static int g_vmm_supported = 1;
static int g_hold_events;
static unsigned long long g_total = DEFAULT_TOTAL;
static unsigned long long g_held_outside;
static unsigned long long g_granularity = DEFAULT_GRANULARITY;
/* What CU_MEM_ALLOC_GRANULARITY_RECOMMENDED answers; 0: the minimum (a real GPU may recommend more) */
static unsigned long long g_recommended_granularity;
static unsigned long long g_classic_bytes, g_physical_bytes, g_host_bytes;
static CUmemGenericAllocationHandle g_next_handle = 1;

#define PUSH(vec, value)                                                               \
    do {                                                                               \
        if (vec##_len == vec##_cap) {                                                  \
            size_t cap_ = vec##_cap ? vec##_cap * 2 : 16;                              \
            void *p_ = realloc(vec, cap_ * sizeof(*vec));                              \
            if (!p_) abort();                                                          \
            vec = p_;                                                                  \
            vec##_cap = cap_;                                                          \
        }                                                                              \
        vec[vec##_len++] = (value);                                                    \
    } while (0)
#define REMOVE_AT(vec, i) do { vec[i] = vec[--vec##_len]; } while (0)

/* ------------------------------------------------------------------ entry, counters, injection */

static Counter *counter(const char *name) {
    for (size_t i = 0; i < g_counters_len; i++)
        if (strcmp(g_counters[i].name, name) == 0) return &g_counters[i];
    Counter c = { name, 0 };
    PUSH(g_counters, c);
    return &g_counters[g_counters_len - 1];
}

/* Counts the call and returns an injected error, if one is due now. Caller holds g_lock. */
static CUresult enter(const char *name) {
    counter(name)->count++;
    for (size_t i = 0; i < g_injections_len; i++) {
        if (strcmp(g_injections[i].name, name) == 0 && --g_injections[i].remaining == 0) {
            CUresult rc = g_injections[i].rc;
            REMOVE_AT(g_injections, i);
            return rc;
        }
    }
    return CUDA_SUCCESS;
}

static char g_delay_name[64];    /* fakecuda_delay: the function to slow down, "" for none */
static unsigned int g_delay_us;

/* Sleeps (outside the lock) if fakecuda_delay asked to slow this function down. */
static void maybe_delay(const char *name) {
    unsigned int us = 0;
    pthread_mutex_lock(&g_lock);
    if (g_delay_name[0] != '\0' && strcmp(g_delay_name, name) == 0) us = g_delay_us;
    pthread_mutex_unlock(&g_lock);
    if (us) usleep(us);
}

#define ENTER()                                                                        \
    maybe_delay(__func__);                                                             \
    pthread_mutex_lock(&g_lock);                                                       \
    do {                                                                               \
        CUresult inj_ = enter(__func__);                                               \
        if (inj_ != CUDA_SUCCESS) { pthread_mutex_unlock(&g_lock); return inj_; }      \
    } while (0)
#define RETURN(rc) do { CUresult r_ = (rc); pthread_mutex_unlock(&g_lock); return r_; } while (0)
#define REQUIRE_INIT() do { if (!g_initialized) RETURN(CUDA_ERROR_NOT_INITIALIZED); } while (0)
#define REQUIRE_CONTEXT()                                                              \
    do {                                                                               \
        REQUIRE_INIT();                                                                \
        if (tl_current == NULL || tl_current->refs <= 0) RETURN(CUDA_ERROR_INVALID_CONTEXT); \
    } while (0)
#define REQUIRE_VMM() do { if (!g_vmm_supported) RETURN(CUDA_ERROR_NOT_SUPPORTED); } while (0)

static unsigned long long used_bytes(void) {
    return g_held_outside + g_classic_bytes + g_physical_bytes;
}

static int fits(unsigned long long bytes) {
    unsigned long long used = used_bytes();
    return used <= g_total && bytes <= g_total - used;
}

static int aligned(unsigned long long v, unsigned long long to) { return v % to == 0; }

/* ------------------------------------------------------------------ init, device, context */

EXPORT CUresult cuInit(unsigned int flags) {
    ENTER();
    if (flags != 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    g_initialized = 1;
    if (g_streams_len == 0) { Stream legacy = { 1, 0, 0 }; PUSH(g_streams, legacy); }
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuDriverGetVersion(int *version) {
    ENTER();
    if (!version) RETURN(CUDA_ERROR_INVALID_VALUE);
    *version = 13000;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceGetCount(int *count) {
    ENTER();
    REQUIRE_INIT();
    if (!count) RETURN(CUDA_ERROR_INVALID_VALUE);
    *count = DEVICE_COUNT;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    ENTER();
    REQUIRE_INIT();
    if (!device) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (ordinal < 0 || ordinal >= DEVICE_COUNT) RETURN(CUDA_ERROR_INVALID_DEVICE);
    *device = ordinal;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    ENTER();
    REQUIRE_INIT();
    if (!name || len <= 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (dev < 0 || dev >= DEVICE_COUNT) RETURN(CUDA_ERROR_INVALID_DEVICE);
    const char *n = "gpumem fake CUDA device";
    strncpy(name, n, (size_t) len);
    name[len - 1] = '\0';
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    ENTER();
    REQUIRE_INIT();
    if (!bytes) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (dev < 0 || dev >= DEVICE_COUNT) RETURN(CUDA_ERROR_INVALID_DEVICE);
    *bytes = g_total;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceGetAttribute(int *value, int attrib, CUdevice dev) {
    ENTER();
    REQUIRE_INIT();
    if (!value || attrib <= 0 || attrib >= ATTR_MAX) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (dev < 0 || dev >= DEVICE_COUNT) RETURN(CUDA_ERROR_INVALID_DEVICE);
    switch (attrib) {
    case ATTR_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *value = g_vmm_supported; break;
    case ATTR_MEMORY_POOLS_SUPPORTED: *value = 0; break;
    default: *value = 0; break;
    }
    RETURN(CUDA_SUCCESS);
}

/* Frees every resource of the (one) context: device and pinned host allocations, reservations with the mappings in
 * them, physical handles, streams but the legacy one, and events. Caller holds g_lock. */
static void free_context_resources(void) {
    for (size_t i = 0; i < g_allocs_len; i++) munmap((void *) g_allocs[i].base, g_allocs[i].size);
    for (size_t i = 0; i < g_host_len; i++) munmap((void *) g_host[i].base, g_host[i].size);
    for (size_t i = 0; i < g_reserves_len; i++) munmap((void *) g_reserves[i].base, g_reserves[i].size);
    for (size_t i = 0; i < g_handles_len; i++) if (g_handles[i].fd >= 0) close(g_handles[i].fd);
    g_allocs_len = g_host_len = g_reserves_len = g_handles_len = g_maps_len = 0;
    g_events_len = 0;
    if (g_streams_len > 1) g_streams_len = 1;
    g_classic_bytes = g_physical_bytes = g_host_bytes = 0;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
    ENTER();
    REQUIRE_INIT();
    if (!ctx) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (dev < 0 || dev >= DEVICE_COUNT) RETURN(CUDA_ERROR_INVALID_DEVICE);
    g_ctx[dev].device = dev;
    g_ctx[dev].refs++;
    *ctx = &g_ctx[dev];
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    ENTER();
    REQUIRE_INIT();
    if (dev < 0 || dev >= DEVICE_COUNT) RETURN(CUDA_ERROR_INVALID_DEVICE);
    if (g_ctx[dev].refs <= 0) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    /* The last release destroys the primary context, and with it everything allocated in it, as the real driver
     * does: without this, a process that opens and closes devices in turn (sim --device cuda run many times in one
     * JVM) ran out of fake memory. DEVICE_COUNT is 1, so every resource is this context's. */
    if (--g_ctx[dev].refs == 0) free_context_resources();
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    ENTER();
    REQUIRE_INIT();
    if (ctx != NULL) {
        int known = 0;
        for (int i = 0; i < DEVICE_COUNT; i++) known |= (ctx == &g_ctx[i] && g_ctx[i].refs > 0);
        if (!known) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    }
    tl_current = ctx;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx) {
    ENTER();
    REQUIRE_INIT();
    if (!ctx) RETURN(CUDA_ERROR_INVALID_VALUE);
    *ctx = tl_current;
    RETURN(CUDA_SUCCESS);
}

static void complete_all_streams(void) {
    for (size_t i = 0; i < g_streams_len; i++) g_streams[i].completed = g_streams[i].enqueued;
}

EXPORT CUresult cuCtxSynchronize(void) {
    ENTER();
    REQUIRE_CONTEXT();
    complete_all_streams();
    RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------ classic allocation */

static Range *find_range(Range *vec, size_t len, uintptr_t base, size_t *index) {
    for (size_t i = 0; i < len; i++)
        if (vec[i].base == base) { if (index) *index = i; return &vec[i]; }
    return NULL;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    ENTER();
    REQUIRE_CONTEXT();
    if (!dptr || bytesize == 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!fits(bytesize)) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    void *p = mmap(NULL, bytesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    Range r = { (uintptr_t) p, bytesize };
    PUSH(g_allocs, r);
    g_classic_bytes += bytesize;
    *dptr = (CUdeviceptr) (uintptr_t) p;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    ENTER();
    REQUIRE_CONTEXT();
    size_t i;
    Range *r = find_range(g_allocs, g_allocs_len, (uintptr_t) dptr, &i);
    if (!r) RETURN(CUDA_ERROR_INVALID_VALUE);
    munmap((void *) r->base, r->size);
    g_classic_bytes -= r->size;
    REMOVE_AT(g_allocs, i);
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    ENTER();
    REQUIRE_CONTEXT();
    if (!free_bytes || !total_bytes) RETURN(CUDA_ERROR_INVALID_VALUE);
    unsigned long long used = used_bytes();
    *free_bytes = used >= g_total ? 0 : g_total - used;
    *total_bytes = g_total;
    RETURN(CUDA_SUCCESS);
}

/* Legacy 32-bit exports: present in the real driver for old binaries; a modern binding must not use them. */
EXPORT CUresult cuMemAlloc(unsigned int *dptr, unsigned int bytesize) {
    (void) dptr; (void) bytesize;
    ENTER();
    RETURN(CUDA_ERROR_NOT_SUPPORTED);
}

EXPORT CUresult cuMemFree(unsigned int dptr) {
    (void) dptr;
    ENTER();
    RETURN(CUDA_ERROR_NOT_SUPPORTED);
}

EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total_bytes) {
    (void) free_bytes; (void) total_bytes;
    ENTER();
    RETURN(CUDA_ERROR_NOT_SUPPORTED);
}

/* ------------------------------------------------------------------ virtual memory management */

static int valid_prop(const MemAllocationProp *prop) {
    return prop && prop->type == 1 && prop->requestedHandleTypes == 0 && prop->location.type == 1
        && prop->location.id >= 0 && prop->location.id < DEVICE_COUNT && prop->win32HandleMetaData == NULL;
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const MemAllocationProp *prop, int option) {
    ENTER();
    REQUIRE_INIT();
    REQUIRE_VMM();
    if (!granularity || !valid_prop(prop) || (option != 0 && option != 1)) RETURN(CUDA_ERROR_INVALID_VALUE);
    *granularity = option == 1 && g_recommended_granularity != 0 ? g_recommended_granularity : g_granularity;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                    unsigned long long flags) {
    ENTER();
    REQUIRE_CONTEXT();
    REQUIRE_VMM();
    (void) addr; /* a hint only */
    size_t page = (size_t) sysconf(_SC_PAGESIZE);
    if (!ptr || size == 0 || flags != 0 || !aligned(size, page)) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (alignment != 0 && (alignment & (alignment - 1)) != 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    size_t align = alignment > g_granularity ? alignment : g_granularity;
    size_t raw_size = size + align;
    char *raw = mmap(NULL, raw_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    uintptr_t base = ((uintptr_t) raw + align - 1) & ~(uintptr_t) (align - 1);
    if (base > (uintptr_t) raw) munmap(raw, base - (uintptr_t) raw);
    uintptr_t end = base + size, raw_end = (uintptr_t) raw + raw_size;
    if (raw_end > end) munmap((void *) end, raw_end - end);
    Range r = { base, size };
    PUSH(g_reserves, r);
    *ptr = (CUdeviceptr) base;
    RETURN(CUDA_SUCCESS);
}

static int overlaps_mapping(uintptr_t addr, size_t size) {
    for (size_t i = 0; i < g_maps_len; i++)
        if (g_maps[i].addr < addr + size && addr < g_maps[i].addr + g_maps[i].size) return 1;
    return 0;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    ENTER();
    REQUIRE_CONTEXT();
    REQUIRE_VMM();
    size_t i;
    Range *r = find_range(g_reserves, g_reserves_len, (uintptr_t) ptr, &i);
    if (!r || r->size != size) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (overlaps_mapping(r->base, r->size)) RETURN(CUDA_ERROR_INVALID_VALUE); /* still mapped */
    munmap((void *) r->base, r->size);
    REMOVE_AT(g_reserves, i);
    RETURN(CUDA_SUCCESS);
}

static Handle *find_handle(CUmemGenericAllocationHandle id, size_t *index) {
    for (size_t i = 0; i < g_handles_len; i++)
        if (g_handles[i].id == id) { if (index) *index = i; return &g_handles[i]; }
    return NULL;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const MemAllocationProp *prop,
                            unsigned long long flags) {
    ENTER();
    REQUIRE_CONTEXT();
    REQUIRE_VMM();
    if (!handle || size == 0 || flags != 0 || !valid_prop(prop) || !aligned(size, g_granularity))
        RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!fits(size)) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    int fd = memfd_create("fakecuda", MFD_CLOEXEC);
    if (fd < 0) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    if (ftruncate(fd, (off_t) size) != 0) { close(fd); RETURN(CUDA_ERROR_OUT_OF_MEMORY); }
    Handle h = { g_next_handle++, fd, size, 0, 0 };
    PUSH(g_handles, h);
    g_physical_bytes += size;
    *handle = h.id;
    RETURN(CUDA_SUCCESS);
}

/* Frees a handle's physical memory once it is released and no longer mapped. */
static void retire_if_dead(size_t index) {
    Handle *h = &g_handles[index];
    if (h->released && h->maps == 0) {
        g_physical_bytes -= h->size;
        REMOVE_AT(g_handles, index);
    }
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    ENTER();
    REQUIRE_CONTEXT();
    REQUIRE_VMM();
    size_t i;
    Handle *h = find_handle(handle, &i);
    if (!h || h->released) RETURN(CUDA_ERROR_INVALID_VALUE);
    close(h->fd);
    h->fd = -1;
    h->released = 1;
    retire_if_dead(i);
    RETURN(CUDA_SUCCESS);
}

static Range *reservation_containing(uintptr_t addr, size_t size) {
    for (size_t i = 0; i < g_reserves_len; i++)
        if (g_reserves[i].base <= addr && addr + size <= g_reserves[i].base + g_reserves[i].size)
            return &g_reserves[i];
    return NULL;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                         unsigned long long flags) {
    ENTER();
    REQUIRE_CONTEXT();
    REQUIRE_VMM();
    uintptr_t addr = (uintptr_t) ptr;
    if (size == 0 || flags != 0 || !aligned(addr, g_granularity) || !aligned(size, g_granularity)
        || !aligned(offset, g_granularity))
        RETURN(CUDA_ERROR_INVALID_VALUE);
    size_t hi;
    Handle *h = find_handle(handle, &hi);
    if (!h || h->released) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (offset > h->size || size > h->size - offset) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!reservation_containing(addr, size) || overlaps_mapping(addr, size)) RETURN(CUDA_ERROR_INVALID_VALUE);
    void *p = mmap((void *) addr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd, (off_t) offset);
    if (p == MAP_FAILED) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    Mapping m = { addr, size, h->id, PROT_NONE };
    h->maps++;
    PUSH(g_maps, m);
    RETURN(CUDA_SUCCESS);
}

static Mapping *mapping_starting_at(uintptr_t addr) {
    for (size_t i = 0; i < g_maps_len; i++)
        if (g_maps[i].addr == addr) return &g_maps[i];
    return NULL;
}

static Mapping *mapping_containing(uintptr_t addr) {
    for (size_t i = 0; i < g_maps_len; i++)
        if (g_maps[i].addr <= addr && addr < g_maps[i].addr + g_maps[i].size) return &g_maps[i];
    return NULL;
}

/* Whether [addr, addr+size) is fully covered by mappings (contiguously). */
static int fully_mapped(uintptr_t addr, size_t size) {
    for (uintptr_t cur = addr; cur < addr + size;) {
        Mapping *m = mapping_containing(cur);
        if (!m) return 0;
        cur = m->addr + m->size;
    }
    return 1;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const MemAccessDesc *desc, size_t count) {
    ENTER();
    REQUIRE_CONTEXT();
    REQUIRE_VMM();
    uintptr_t addr = (uintptr_t) ptr;
    if (!desc || count == 0 || size == 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    int prot = -1;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != 1 || desc[i].location.id < 0 || desc[i].location.id >= DEVICE_COUNT)
            RETURN(CUDA_ERROR_INVALID_DEVICE);
        switch (desc[i].flags) {
        case 0: prot = PROT_NONE; break;
        case 1: prot = PROT_READ; break;
        case 3: prot = PROT_READ | PROT_WRITE; break;
        default: RETURN(CUDA_ERROR_INVALID_VALUE);
        }
    }
    if (!fully_mapped(addr, size)) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (mprotect((void *) addr, size, prot) != 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    /* Mappings partly covered get the new protection for the covered part only; record the common case. */
    for (size_t i = 0; i < g_maps_len; i++)
        if (g_maps[i].addr >= addr && g_maps[i].addr + g_maps[i].size <= addr + size) g_maps[i].prot = prot;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    ENTER();
    REQUIRE_CONTEXT();
    REQUIRE_VMM();
    uintptr_t addr = (uintptr_t) ptr, end = addr + size;
    if (size == 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    /* The range must be a run of whole mappings: a sub-range of one cuMemMap cannot be unmapped. */
    for (uintptr_t cur = addr; cur < end;) {
        Mapping *m = mapping_starting_at(cur);
        if (!m || m->addr + m->size > end) RETURN(CUDA_ERROR_INVALID_VALUE);
        cur = m->addr + m->size;
    }
    void *p = mmap((void *) addr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED) RETURN(CUDA_ERROR_UNKNOWN);
    for (size_t i = 0; i < g_maps_len;) {
        if (g_maps[i].addr >= addr && g_maps[i].addr < end) {
            size_t hi;
            Handle *h = find_handle(g_maps[i].handle, &hi);
            REMOVE_AT(g_maps, i);
            h->maps--;
            retire_if_dead(hi);
        } else {
            i++;
        }
    }
    RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------ copies and host memory */

/* Whether [addr, addr+n) is device memory this context may touch with the given protection. */
static int device_accessible(uintptr_t addr, size_t n, int need) {
    if (n == 0) return 1;
    for (size_t i = 0; i < g_allocs_len; i++)
        if (g_allocs[i].base <= addr && addr + n <= g_allocs[i].base + g_allocs[i].size) return 1;
    for (uintptr_t cur = addr; cur < addr + n;) {
        Mapping *m = mapping_containing(cur);
        if (!m || (m->prot & need) != need) return 0;
        cur = m->addr + m->size;
    }
    return 1;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    ENTER();
    REQUIRE_CONTEXT();
    if ((!src && n) || !device_accessible((uintptr_t) dst, n, PROT_WRITE)) RETURN(CUDA_ERROR_INVALID_VALUE);
    memcpy((void *) (uintptr_t) dst, src, n);
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    ENTER();
    REQUIRE_CONTEXT();
    if ((!dst && n) || !device_accessible((uintptr_t) src, n, PROT_READ)) RETURN(CUDA_ERROR_INVALID_VALUE);
    memcpy(dst, (const void *) (uintptr_t) src, n);
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    ENTER();
    REQUIRE_CONTEXT();
    if (!device_accessible((uintptr_t) dst, n, PROT_WRITE) || !device_accessible((uintptr_t) src, n, PROT_READ))
        RETURN(CUDA_ERROR_INVALID_VALUE);
    memmove((void *) (uintptr_t) dst, (const void *) (uintptr_t) src, n);
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags) {
    ENTER();
    REQUIRE_CONTEXT();
    if (!pp || bytesize == 0 || (flags & ~0x7u) != 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    void *p = mmap(NULL, bytesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    Range r = { (uintptr_t) p, bytesize };
    PUSH(g_host, r);
    g_host_bytes += bytesize;
    *pp = p;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuMemFreeHost(void *p) {
    ENTER();
    REQUIRE_CONTEXT();
    size_t i;
    Range *r = find_range(g_host, g_host_len, (uintptr_t) p, &i);
    if (!r) RETURN(CUDA_ERROR_INVALID_VALUE);
    munmap(p, r->size);
    g_host_bytes -= r->size;
    REMOVE_AT(g_host, i);
    RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------ streams and events */

static Stream *stream_of(CUstream s, size_t *index) {
    uintptr_t v = (uintptr_t) s;
    size_t i = v == 0 ? 0 : (size_t) (v - STREAM_BASE);
    if (v != 0 && (v < STREAM_BASE || i == 0)) return NULL;
    if (i >= g_streams_len || !g_streams[i].alive) return NULL;
    if (index) *index = i;
    return &g_streams[i];
}

static Event *event_of(CUevent e) {
    uintptr_t v = (uintptr_t) e;
    if (v < EVENT_BASE) return NULL;
    size_t i = (size_t) (v - EVENT_BASE);
    if (i >= g_events_len || !g_events[i].alive) return NULL;
    return &g_events[i];
}

static int event_done(const Event *ev) {
    return !ev->recorded || g_streams[ev->stream].completed >= ev->ticket;
}

EXPORT CUresult cuStreamCreate(CUstream *stream, unsigned int flags) {
    ENTER();
    REQUIRE_CONTEXT();
    if (!stream || (flags & ~0x1u) != 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    Stream s = { 1, 0, 0 };
    PUSH(g_streams, s);
    *stream = (CUstream) (uintptr_t) (STREAM_BASE + g_streams_len - 1);
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
    ENTER();
    REQUIRE_CONTEXT();
    Stream *s = stream == NULL ? NULL : stream_of(stream, NULL);
    if (!s) RETURN(CUDA_ERROR_INVALID_HANDLE);
    s->alive = 0;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuStreamSynchronize(CUstream stream) {
    ENTER();
    REQUIRE_CONTEXT();
    Stream *s = stream_of(stream, NULL);
    if (!s) RETURN(CUDA_ERROR_INVALID_HANDLE);
    s->completed = s->enqueued;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuStreamQuery(CUstream stream) {
    ENTER();
    REQUIRE_CONTEXT();
    Stream *s = stream_of(stream, NULL);
    if (!s) RETURN(CUDA_ERROR_INVALID_HANDLE);
    RETURN(s->completed >= s->enqueued ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY);
}

EXPORT CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
    ENTER();
    REQUIRE_CONTEXT();
    if (!stream_of(stream, NULL) || !event_of(event)) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (flags != 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuEventCreate(CUevent *event, unsigned int flags) {
    ENTER();
    REQUIRE_CONTEXT();
    if (!event || (flags & ~0x7u) != 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    Event e = { 1, 0, 0, 0 };
    PUSH(g_events, e);
    *event = (CUevent) (uintptr_t) (EVENT_BASE + g_events_len - 1);
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuEventRecord(CUevent event, CUstream stream) {
    ENTER();
    REQUIRE_CONTEXT();
    Event *e = event_of(event);
    size_t si;
    Stream *s = stream_of(stream, &si);
    if (!e || !s) RETURN(CUDA_ERROR_INVALID_HANDLE);
    s->enqueued++;
    e->recorded = 1;
    e->stream = si;
    e->ticket = s->enqueued;
    if (!g_hold_events) s->completed = s->enqueued;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuEventQuery(CUevent event) {
    ENTER();
    REQUIRE_CONTEXT();
    Event *e = event_of(event);
    if (!e) RETURN(CUDA_ERROR_INVALID_HANDLE);
    RETURN(event_done(e) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY);
}

EXPORT CUresult cuEventSynchronize(CUevent event) {
    ENTER();
    REQUIRE_CONTEXT();
    Event *e = event_of(event);
    if (!e) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (e->recorded && g_streams[e->stream].completed < e->ticket) g_streams[e->stream].completed = e->ticket;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuEventDestroy_v2(CUevent event) {
    ENTER();
    REQUIRE_CONTEXT();
    Event *e = event_of(event);
    if (!e) RETURN(CUDA_ERROR_INVALID_HANDLE);
    e->alive = 0;
    RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------ error names */

static const char *error_name(CUresult rc) {
    switch (rc) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_READY: return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_NOT_PERMITTED: return "CUDA_ERROR_NOT_PERMITTED";
    case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_UNKNOWN: return "CUDA_ERROR_UNKNOWN";
    default: return NULL;
    }
}

EXPORT CUresult cuGetErrorName(CUresult error, const char **str) {
    ENTER();
    if (!str) RETURN(CUDA_ERROR_INVALID_VALUE);
    *str = error_name(error);
    RETURN(*str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

EXPORT CUresult cuGetErrorString(CUresult error, const char **str) {
    ENTER();
    if (!str) RETURN(CUDA_ERROR_INVALID_VALUE);
    *str = error_name(error) ? "fake driver error (see the error name)" : NULL;
    if (error == CUDA_SUCCESS) *str = "no error";
    if (error == CUDA_ERROR_OUT_OF_MEMORY) *str = "out of memory";
    RETURN(*str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

/* ------------------------------------------------------------------ control API for tests */

/* Frees everything, forgets counters and injections, and restores the defaults (8 GiB, 2 MiB, VMM on). */
EXPORT void fakecuda_reset(void) {
    pthread_mutex_lock(&g_lock);
    free_context_resources();
    g_streams_len = g_counters_len = g_injections_len = 0;
    for (int i = 0; i < DEVICE_COUNT; i++) g_ctx[i].refs = 0;
    g_initialized = 0;
    g_vmm_supported = 1;
    g_hold_events = 0;
    g_total = DEFAULT_TOTAL;
    g_held_outside = 0;
    g_granularity = DEFAULT_GRANULARITY;
    g_recommended_granularity = 0;
    g_delay_name[0] = '\0';
    g_delay_us = 0;
    pthread_mutex_unlock(&g_lock);
}

/* Makes every call of the named driver function sleep `micros` before it runs (0 or NULL: no delay), so that
 * tests can widen a race between Java threads around that call. */
EXPORT int fakecuda_delay(const char *function, unsigned int micros) {
    if (function && strlen(function) >= sizeof g_delay_name) return -1;
    pthread_mutex_lock(&g_lock);
    if (function && micros) { strcpy(g_delay_name, function); g_delay_us = micros; }
    else { g_delay_name[0] = '\0'; g_delay_us = 0; }
    pthread_mutex_unlock(&g_lock);
    return 0;
}

#define SETTER(name, type, var)                                                        \
    EXPORT void name(type v) { pthread_mutex_lock(&g_lock); var = v; pthread_mutex_unlock(&g_lock); }
SETTER(fakecuda_set_total, unsigned long long, g_total)
SETTER(fakecuda_set_held_outside, unsigned long long, g_held_outside)
SETTER(fakecuda_set_granularity, unsigned long long, g_granularity)
SETTER(fakecuda_set_recommended_granularity, unsigned long long, g_recommended_granularity)
SETTER(fakecuda_set_vmm_supported, int, g_vmm_supported)
SETTER(fakecuda_hold_events, int, g_hold_events)

/* Makes the nth call (1 = the next one) of the named driver function return rc without doing anything. */
EXPORT int fakecuda_fail_nth(const char *function, long long nth, int rc) {
    if (!function || nth < 1 || strlen(function) >= sizeof(((Injection *) 0)->name)) return -1;
    pthread_mutex_lock(&g_lock);
    Injection inj;
    memset(&inj, 0, sizeof inj);
    strcpy(inj.name, function);
    inj.remaining = nth;
    inj.rc = rc;
    PUSH(g_injections, inj);
    pthread_mutex_unlock(&g_lock);
    return 0;
}

/* How many times the named driver function was called since the last reset (failed calls included). */
EXPORT long long fakecuda_call_count(const char *function) {
    long long n = 0;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_counters_len; i++)
        if (function && strcmp(g_counters[i].name, function) == 0) n = g_counters[i].count;
    pthread_mutex_unlock(&g_lock);
    return n;
}

/* Completes all work recorded so far on a stream (0 = the legacy stream); returns -1 for an unknown stream. */
EXPORT int fakecuda_complete_stream(unsigned long long stream) {
    pthread_mutex_lock(&g_lock);
    Stream *s = stream_of((CUstream) (uintptr_t) stream, NULL);
    if (s) s->completed = s->enqueued;
    pthread_mutex_unlock(&g_lock);
    return s ? 0 : -1;
}

EXPORT void fakecuda_complete_all(void) {
    pthread_mutex_lock(&g_lock);
    complete_all_streams();
    pthread_mutex_unlock(&g_lock);
}

#define GETTER(name, expr)                                                             \
    EXPORT long long name(void) {                                                      \
        pthread_mutex_lock(&g_lock); long long v_ = (long long) (expr);                \
        pthread_mutex_unlock(&g_lock); return v_;                                      \
    }
GETTER(fakecuda_classic_bytes, g_classic_bytes)            /* bytes held by cuMemAlloc_v2 */
GETTER(fakecuda_physical_bytes, g_physical_bytes)          /* bytes of cuMemCreate handles still alive */
GETTER(fakecuda_live_handles, g_handles_len)               /* handles created and not yet freed */
GETTER(fakecuda_live_mappings, g_maps_len)                 /* cuMemMap mappings in place */
GETTER(fakecuda_live_reservations, g_reserves_len)         /* reserved address ranges */
GETTER(fakecuda_live_allocations, g_allocs_len)            /* cuMemAlloc_v2 allocations */
GETTER(fakecuda_host_bytes, g_host_bytes)                  /* pinned host bytes (cuMemHostAlloc) */
