// Per-channel sums over the rows of an NHWC tensor, two loop orders (issue 21: CNN training's batch-norm
// statistics and their backward). `passes`: what stax.cpu emits today, the channel vector block as the
// parallel outer loop and the rows inside it (64 / 8 = 8 walks of the whole tensor at a 256-byte stride).
// `rows`: rows split over the threads, every channel's accumulator in registers, per-thread partials
// combined after a barrier (split_kept.py's combine). ResNet-18's first batch norm: 64 channels, 4 x 112 x
// 112 rows; a sum and a sum of products, as its backward takes.
//   g++ -O3 -march=native -mavx2 -mfma -fopenmp benchmarks/cpu/nhwc_channel_sums.cpp -o /tmp/nhwc && /tmp/nhwc
// 2-core AMD EPYC VM, 2026-12-07, quiet: passes 2.8-2.9 ms, rows 0.41-0.46 ms (2 threads); 4.9-6.1 vs
// 1.1-1.3 ms (1 thread). The two 12.8 MB inputs fit this VM's L3 after the first round, so a training
// step, which reads them from DRAM, gains less than this ratio.
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <omp.h>
typedef float v8 __attribute__((vector_size(32)));
static inline v8 ld(const float* p){ v8 v; __builtin_memcpy(&v,p,32); return v; }
static inline void st(float* p, v8 v){ __builtin_memcpy(p,&v,32); }
const int C=64; const long R=50176;
// current form: channel block outer (parallel), rows inner
void passes(const float* x, const float* g, float* s1, float* s2){
  #pragma omp parallel for
  for(int c=0;c<C;c+=8){ v8 a={0},b={0}; for(long r=0;r<R;r++){ v8 xv=ld(x+c+64*r), gv=ld(g+c+64*r); a+=gv; b+=gv*xv; } st(s1+c,a); st(s2+c,b); }
}
// interchange: rows split over threads, all channels' accumulators per thread, combined after
void rows(const float* x, const float* g, float* s1, float* s2){
  int nt=omp_get_max_threads(); float part[2][16][64];
  #pragma omp parallel
  { int t=omp_get_thread_num(), n=omp_get_num_threads(); long lo=R*t/n, hi=R*(t+1)/n;
    v8 a[8]={}, b[8]={};
    for(long r=lo;r<hi;r++){ const float* xr=x+64*r; const float* gr=g+64*r;
      for(int k=0;k<8;k++){ v8 xv=ld(xr+8*k), gv=ld(gr+8*k); a[k]+=gv; b[k]+=gv*xv; } }
    for(int k=0;k<8;k++){ st(&part[0][t][8*k],a[k]); st(&part[1][t][8*k],b[k]); }
    #pragma omp barrier
    #pragma omp for
    for(int c=0;c<C;c++){ float u=0,w=0; for(int j=0;j<n;j++){u+=part[0][j][c]; w+=part[1][j][c];} s1[c]=u; s2[c]=w; }
  }
}
int main(){ float* x=(float*)aligned_alloc(64,4*C*R); float* g=(float*)aligned_alloc(64,4*C*R);
  for(long i=0;i<C*R;i++){x[i]=(i%7)*0.1f; g[i]=(i%5)*0.2f;}
  float s1[64],s2[64],t1[64],t2[64];
  for(int rep=0;rep<3;rep++){
    auto t0=std::chrono::steady_clock::now(); for(int i=0;i<20;i++) passes(x,g,s1,s2);
    auto t1_=std::chrono::steady_clock::now(); for(int i=0;i<20;i++) rows(x,g,t1,t2);
    auto t2_=std::chrono::steady_clock::now();
    printf("passes %.2f ms  rows %.2f ms  (max rel diff %.1e)\n", std::chrono::duration<double,std::milli>(t1_-t0).count()/20, std::chrono::duration<double,std::milli>(t2_-t1_).count()/20, (s2[3]-t2[3])/t2[3]);
  }
}
