/* A program without libc (-nostdlib -static): a few hundred bytes once stripped, the fuzz
 * seeds' source. -DUW_GO_SECTION / -DUW_GO_NOTE give it the marks of a Go program; -DUW_DRAP
 * (gcc) a stack-realigning function; -DUW_SIGNAL a signal trampoline's CFI (the 'S'
 * augmentation, CFA and registers as expressions); -DUW_ODD a function whose rows, one a byte,
 * have rules the sampler cannot follow, then one it can; -DUW_LONG a function of 10000 rows,
 * past the builder's cap of rows in one FDE. */
__attribute__((noinline)) int uw_leaf(int x)
{
    return x * 3 + 1;
}

__attribute__((noinline)) long uw_twice(long (*f)(long), long x)
{
    return f(f(x)) + uw_leaf((int)x);
}

static long uw_inc(long x)
{
    return x + 1;
}

#ifdef UW_DRAP
__attribute__((noinline)) void uw_use(char *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

__attribute__((noinline)) int uw_realign(int n)
{
    __attribute__((aligned(64))) char buf[256];
    char vla[n * 16];
    for (int i = 0; i < n * 16; i++)
        vla[i] = (char)i;
    uw_use(buf);
    uw_use(vla);
    return buf[3] + vla[1];
}
#endif

#ifdef UW_GO_SECTION
__attribute__((used, section(".go.buildinfo"))) static const char uw_buildinfo[16] =
    "\xff Go buildinf:";
#endif

#ifdef UW_GO_NOTE
/* the Go linker's build-id note: name "Go", type 4 */
__asm__(".pushsection .note.go.buildid,\"a\",@note\n"
        ".p2align 2\n"
        ".long 3, 8, 4\n"
        ".asciz \"Go\"\n"
        ".p2align 2\n"
        ".ascii \"uwgonote\"\n"
        ".popsection\n");
#endif

#ifdef UW_SIGNAL
__asm__(".text\n"
        ".globl uw_sigtramp\n"
        "uw_sigtramp:\n"
        ".cfi_startproc\n"
        ".cfi_signal_frame\n"
        ".cfi_escape 0x0f, 0x04, 0x77, 0xa0, 0x01, 0x06\n" /* CFA: breg7 160; deref */
        ".cfi_escape 0x10, 0x10, 0x03, 0x77, 0xa8, 0x01\n" /* rip: breg7 168 */
        "nop\n"
        "mov $15, %eax\n"
        "syscall\n"
        ".cfi_endproc\n");
#endif

#ifdef UW_ODD
__asm__(".text\n"
        ".globl uw_odd\n"
        "uw_odd:\n"
        ".cfi_startproc\n"
        "nop\n"
        ".cfi_register %rbp, %rbx\n" /* rbp kept in another register */
        "nop\n"
        ".cfi_same_value %rbp\n"
        ".cfi_def_cfa %rbx, 16\n" /* CFA from another register */
        "nop\n"
        ".cfi_def_cfa %rsp, 16\n"
        ".cfi_offset %rbp, -2048\n" /* a slot out of the arg range */
        "nop\n"
        ".cfi_restore %rbp\n"
        ".cfi_def_cfa_offset 0x100000\n" /* an offset past PFR_UW_OFF_MAX */
        "nop\n"
        ".cfi_def_cfa_offset 8\n"
        "ret\n"
        ".cfi_endproc\n");
#endif

#ifdef UW_LONG
__asm__(".text\n"
        ".globl uw_long\n"
        "uw_long:\n"
        ".cfi_startproc\n"
        ".rept 5000\n"
        "push %rax\n"
        ".cfi_adjust_cfa_offset 8\n"
        "pop %rax\n"
        ".cfi_adjust_cfa_offset -8\n"
        ".endr\n"
        "ret\n"
        ".cfi_endproc\n");
#endif

void _start(void)
{
    long r = uw_twice(uw_inc, 5);
#ifdef UW_DRAP
    r += uw_realign((int)r);
#endif
    __asm__ volatile("mov $60, %%eax; syscall" : : "D"(r) : "rax", "rcx", "r11", "memory");
    __builtin_unreachable();
}
