/* jobcg benchmark subject: a program that does nothing, linked like the jobcg command (a static
 * PIE when meson's static_exe is on). Its fork+exec+wait is the least any launcher built this
 * way can cost before doing any work, so bench/run can show how much of `jobcg run` is the
 * second exec itself rather than jobcg's code. */
int main(void)
{
	return 0;
}
