/* The PTX of two kernels the benchmarks that play a program beside drk's
 * work share: spin(cycles), each block's thread waiting out `cycles` of its
 * SM's clock; tiny(p), which writes one word (a launch as short as one can
 * be). Static: one program includes it once. */
#ifndef DRK_BENCH_SPIN_H
#define DRK_BENCH_SPIN_H

static const char spin_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                               ".visible .entry spin(.param .u64 cycles)\n{\n"
                               ".reg .u64 %r<4>;\n.reg .pred %p;\n"
                               "ld.param.u64 %r1, [cycles];\nmov.u64 %r2, %clock64;\n"
                               "L: mov.u64 %r3, %clock64;\nsub.u64 %r3, %r3, %r2;\n"
                               "setp.lt.u64 %p, %r3, %r1;\n@%p bra L;\nret;\n}\n"
                               ".visible .entry tiny(.param .u64 p)\n{\n.reg .u64 %a;\n.reg .u32 %v;\n"
                               "ld.param.u64 %a, [p];\ncvta.to.global.u64 %a, %a;\nmov.u32 %v, 7;\n"
                               "st.global.u32 [%a], %v;\nret;\n}\n";

#endif
