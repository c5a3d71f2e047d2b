/*
 * Unit test: the built jobcg binary needs no shared library it should not. Every step exec()s
 * jobcg, and each library the dynamic loader maps and relocates adds to every launch, so with
 * static_exe it is a static PIE (no loader, nothing NEEDED), with static_deps only libc (and
 * the sanitizer runtimes of a sanitized build) may be NEEDED, and in no build libsystemd, which
 * the systemd scope backend dlopen()s (lib/src/core/sdbus_dl.c).
 * Reads the ELF dynamic section itself, like `readelf -d`.
 */
#include <elf.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "tap.h"
#include "util.h"

#ifndef JOBCG_EXE
#error "tests/unit/meson.build defines JOBCG_EXE, the path of the built jobcg"
#endif

struct elf_view {
	const unsigned char *map;
	size_t size;
	const Elf64_Ehdr *eh;
};

static bool in_file(const struct elf_view *v, uint64_t off, uint64_t len)
{
	return off <= v->size && len <= v->size - off;
}

static const Elf64_Shdr *section(const struct elf_view *v, size_t i)
{
	uint64_t off = v->eh->e_shoff + (uint64_t)i * v->eh->e_shentsize;

	return in_file(v, off, sizeof(Elf64_Shdr)) ? (const Elf64_Shdr *)(v->map + off) : NULL;
}

/* String @off of string table section @link, or NULL when out of bounds. */
static const char *str_at(const struct elf_view *v, uint32_t link, uint64_t off)
{
	const Elf64_Shdr *s = section(v, link);

	if (!s || s->sh_type != SHT_STRTAB || off >= s->sh_size ||
	    !in_file(v, s->sh_offset, s->sh_size) ||
	    !memchr(v->map + s->sh_offset + off, '\0', s->sh_size - off))
		return NULL;
	return (const char *)v->map + s->sh_offset + off;
}

static bool allowed(const char *lib, const char *interp)
{
	static const char *const always[] = {"libc.so.6", NULL};
	static const char *const shared_deps[] = {"libbpf.so.*", "libjson-c.so.*", "libelf.so.*",
						  "libz.so.*", NULL};

	for (size_t i = 0; always[i]; i++)
		if (streq(lib, always[i]))
			return true;
	/* The interpreter is mapped for every dynamic executable anyway: naming it costs nothing
	 * (a PIE linking libjson-c.a gets it from the relaxed __tls_get_addr reference). */
	if (interp && streq(lib, interp))
		return true;
	if (strstr(JOBCG_SANITIZE, "address") && !fnmatch("libasan.so.*", lib, 0))
		return true;
	if (strstr(JOBCG_SANITIZE, "undefined") && !fnmatch("libubsan.so.*", lib, 0))
		return true;
	if (!JOBCG_STATIC_DEPS)
		for (size_t i = 0; shared_deps[i]; i++)
			if (!fnmatch(shared_deps[i], lib, 0))
				return true;
	return false;
}

int main(void)
{
	struct elf_view v = {0};
	_cleanup_close_ int fd = open(JOBCG_EXE, O_RDONLY | O_CLOEXEC);
	const char *interp = NULL;
	size_t n_needed = 0, n_dynsym = 0;
	bool libc = false;
	struct stat st;

	if (!ok(fd >= 0 && fstat(fd, &st) == 0, "open %s", JOBCG_EXE))
		return tap_done();
	v.size = (size_t)st.st_size;
	v.map = mmap(NULL, v.size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (!ok(v.map != MAP_FAILED, "map %s", JOBCG_EXE))
		return tap_done();
	v.eh = (const Elf64_Ehdr *)v.map;
	if (!ok(v.size >= sizeof(Elf64_Ehdr) && !memcmp(v.eh->e_ident, ELFMAG, SELFMAG) &&
		    v.eh->e_ident[EI_CLASS] == ELFCLASS64 &&
		    v.eh->e_shentsize == sizeof(Elf64_Shdr) &&
		    v.eh->e_phentsize == sizeof(Elf64_Phdr),
		"%s is a 64-bit ELF file", JOBCG_EXE))
		return tap_done();

	for (size_t i = 0; i < v.eh->e_phnum; i++) {
		uint64_t off = v.eh->e_phoff + (uint64_t)i * sizeof(Elf64_Phdr);
		const Elf64_Phdr *ph = (const Elf64_Phdr *)(v.map + off);

		if (in_file(&v, off, sizeof(*ph)) && ph->p_type == PT_INTERP && ph->p_filesz > 1 &&
		    in_file(&v, ph->p_offset, ph->p_filesz) &&
		    v.map[ph->p_offset + ph->p_filesz - 1] == '\0') {
			interp = strrchr((const char *)v.map + ph->p_offset, '/');
			interp = interp ? interp + 1 : (const char *)v.map + ph->p_offset;
		}
	}

	for (size_t i = 0; i < v.eh->e_shnum; i++) {
		const Elf64_Shdr *s = section(&v, i);

		if (!s || !in_file(&v, s->sh_offset, s->sh_size))
			continue;
		if (s->sh_type == SHT_DYNAMIC) {
			const Elf64_Dyn *d = (const Elf64_Dyn *)(v.map + s->sh_offset);

			for (size_t k = 0; k < s->sh_size / sizeof(*d) && d[k].d_tag != DT_NULL;
			     k++) {
				const char *lib;

				if (d[k].d_tag != DT_NEEDED)
					continue;
				n_needed++;
				lib = str_at(&v, s->sh_link, d[k].d_un.d_val);
				if (!lib) {
					ok(false, "NEEDED entry %zu has a name", n_needed);
					continue;
				}
				libc |= streq(lib, "libc.so.6");
				ok(allowed(lib, interp), "NEEDED %s is expected (static_deps=%s)",
				   lib, JOBCG_STATIC_DEPS ? "true" : "false");
				ok(!startswith(lib, "libsystemd"),
				   "%s is not libsystemd (dlopen()ed by the systemd backend only)",
				   lib);
			}
		} else if (s->sh_type == SHT_DYNSYM) {
			const Elf64_Sym *sym = (const Elf64_Sym *)(v.map + s->sh_offset);

			for (size_t k = 1; k < s->sh_size / sizeof(*sym); k++) {
				const char *name = str_at(&v, s->sh_link, sym[k].st_name);

				n_dynsym++;
				/* sd-bus.h's inline cleanup helpers call sd_* functions: none may
				 * leave a reference for ld.so to resolve. */
				if (sym[k].st_shndx == SHN_UNDEF && name && startswith(name, "sd_"))
					ok(false, "undefined dynamic symbol %s (from libsystemd)",
					   name);
			}
		}
	}
	/* Proof that the walk above saw the tables it checks. */
	if (JOBCG_STATIC_EXE) {
		/* static_exe: no loader at all, and still position independent (ASLR). */
		ok(!interp && n_needed == 0, "static_exe: no interpreter, nothing NEEDED (%zu)",
		   n_needed);
		ok(v.eh->e_type == ET_DYN, "static_exe: a static PIE (ELF type %u)",
		   (unsigned)v.eh->e_type);
	} else
		ok(n_needed > 0 && libc, "%zu NEEDED entries read, libc.so.6 among them", n_needed);
	if (!JOBCG_STATIC_EXE)
		ok(n_dynsym > 0, "%zu dynamic symbols read, none of them an undefined sd_*",
		   n_dynsym);
	munmap((void *)v.map, v.size);
	return tap_done();
}
