// Tiled bf16 GEMM, C[M, N] = A[M, K] @ B[N, K]^T with f32 accumulation, for the checker
// benchmark (benchmarks/bench_check.py): a kernel of the size and kind a schedule lowers
// to, compiled to measure what one compile costs. Self-contained (no includes) so that
// nvcc and NVRTC compile the same text.
//
// CTA tile 128x128x32, 4 warps in a 2x2 grid, each warp 64x64 built from m16n8k16 mma.sync;
// a 2-stage shared-memory ring filled with cp.async (16 bytes per thread and copy), operands
// read with ldmatrix. Tail tiles are zero-filled on load and masked on store.

#define BM 128
#define BN 128
#define BK 32
#define STAGES 2
#define THREADS 128
#define PAD 8  // bf16 elements of row padding against bank conflicts

typedef unsigned short bf16_t;

__device__ __forceinline__ unsigned smem_addr(const void *p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async_16(void *dst, const void *src, bool valid) {
    int bytes = valid ? 16 : 0;  // src-size 0 zero-fills the 16 destination bytes
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(smem_addr(dst)), "l"(src), "r"(bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldmatrix_x2(unsigned (&r)[2], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const unsigned (&a)[4],
                                               const unsigned (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Copy one BMxBK (or BNxBK) tile of a row-major [rows, K] matrix into shared memory.
__device__ __forceinline__ void load_tile(bf16_t (*dst)[BK + PAD], const bf16_t *src, int row0,
                                          int rows, int k0, int K) {
    const int chunks = BM * BK / 8;  // 16-byte chunks of 8 bf16
    for (int c = threadIdx.x; c < chunks; c += THREADS) {
        int r = c / (BK / 8);
        int col = (c % (BK / 8)) * 8;
        int gr = row0 + r, gc = k0 + col;
        bool valid = gr < rows && gc + 8 <= K;
        const bf16_t *g = valid ? src + (long long)gr * K + gc : src;
        cp_async_16(&dst[r][col], g, valid);
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_bf16_tn(const bf16_t *__restrict__ A, const bf16_t *__restrict__ B,
             float *__restrict__ C, int M, int N, int K) {
    __shared__ __align__(128) bf16_t a_s[STAGES][BM][BK + PAD];
    __shared__ __align__(128) bf16_t b_s[STAGES][BN][BK + PAD];

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / 2) * 64, wn = (warp % 2) * 64;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const int ktiles = (K + BK - 1) / BK;

    float acc[4][8][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.0f;

    load_tile(a_s[0], A, m0, M, 0, K);
    load_tile(b_s[0], B, n0, N, 0, K);
    cp_async_commit();

    for (int kt = 0; kt < ktiles; ++kt) {
        const int s = kt % STAGES;
        if (kt + 1 < ktiles) {
            load_tile(a_s[(kt + 1) % STAGES], A, m0, M, (kt + 1) * BK, K);
            load_tile(b_s[(kt + 1) % STAGES], B, n0, N, (kt + 1) * BK, K);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();

#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned af[4][4], bfr[8][2];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                int r = wm + i * 16 + (lane % 16);
                int c = kk + (lane / 16) * 8;
                ldmatrix_x4(af[i], &a_s[s][r][c]);
            }
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                int r = wn + j * 8 + (lane % 8);
                int c = kk + ((lane / 8) % 2) * 8;
                ldmatrix_x2(bfr[j], &b_s[s][r][c]);
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) mma_bf16_16816(acc[i][j], af[i], bfr[j]);
        }
        __syncthreads();
    }
    cp_async_wait<0>();

    // Accumulator layout of m16n8: thread holds rows lane/4 and lane/4+8, columns 2*(lane%4)+{0,1}.
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                int r = m0 + wm + i * 16 + lane / 4 + h * 8;
                int c = n0 + wn + j * 8 + (lane % 4) * 2;
                if (r < M && c < N) C[(long long)r * N + c] = acc[i][j][2 * h];
                if (r < M && c + 1 < N) C[(long long)r * N + c + 1] = acc[i][j][2 * h + 1];
            }
}
