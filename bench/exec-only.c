/* jobcg benchmark subject: a program with no C library at all, only an exit system call. Its
 * fork+exec+wait is the least an exec of any program costs on this machine, so bench/run can
 * say how far even a launcher with no start-up of its own would stay from the floor. */
void _start(void);

#if defined(__x86_64__)
__attribute__((naked, noreturn)) void _start(void)
{
	__asm__ volatile("mov $60, %eax\n\txor %edi, %edi\n\tsyscall");
}
#elif defined(__aarch64__)
__attribute__((naked, noreturn)) void _start(void)
{
	__asm__ volatile("mov x8, #93\n\tmov x0, #0\n\tsvc #0");
}
#else
#error "bench/meson.build builds this only on x86_64 and aarch64"
#endif
