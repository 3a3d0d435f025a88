/* drk's dlsym, exported as dlsym@GLIBC_2.2.5 and dlsym@@GLIBC_2.34 so that
 * callers bound to either glibc version reach it.
 *
 * It asks drk_dlsym_answer for a hook. With none, it jumps (not calls) into
 * glibc's dlsym with the caller's arguments and return address untouched:
 * glibc resolves RTLD_NEXT and RTLD_DEFAULT relative to the code that called
 * dlsym, so only a tail jump keeps those lookups exactly as without drk. The
 * C compiler does not promise a tail call (sanitizer builds, -O0), hence
 * assembly. */
#if defined(__x86_64__)
        .text
        .globl  drk_dlsym_225
        .globl  drk_dlsym_234
        .type   drk_dlsym_225, @function
        .type   drk_dlsym_234, @function
        .symver drk_dlsym_225, dlsym@GLIBC_2.2.5
        .symver drk_dlsym_234, dlsym@@GLIBC_2.34
        .p2align 4
drk_dlsym_225:
drk_dlsym_234:
        .cfi_startproc
        endbr64
        push    %rdi
        .cfi_adjust_cfa_offset 8
        push    %rsi
        .cfi_adjust_cfa_offset 8
        sub     $8, %rsp                /* 16-byte alignment for the call */
        .cfi_adjust_cfa_offset 8
        call    drk_dlsym_answer
        add     $8, %rsp
        .cfi_adjust_cfa_offset -8
        pop     %rsi
        .cfi_adjust_cfa_offset -8
        pop     %rdi
        .cfi_adjust_cfa_offset -8
        test    %rax, %rax
        jz      1f
        ret
1:      jmp     *drk_dlsym_forward(%rip)
        .cfi_endproc
        .size   drk_dlsym_225, .-drk_dlsym_225
        .size   drk_dlsym_234, .-drk_dlsym_234
#else
#error "drk's dlsym entry is written for x86-64 only"
#endif
        .section .note.GNU-stack, "", @progbits
