/* jobcg internal: reading device programs as bpftool prints them, or as raw instruction files. */
#pragma once

#include <linux/bpf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Parse the text of `bpftool prog dump xlated id N` (lines "6: (55) if r2 != 0x2 goto pc+4").
 * Lines that are not instructions (blank, "; source", function headers, opcode byte dumps)
 * are skipped; instruction numbers must follow each other. Helper calls are translated by
 * name (see bpftext_helper_from_name). @filename is used in errors (may be NULL).
 * On success *ret (malloc'd) holds *ret_n instructions that passed bpfvm_check().
 * Errors: -EINVAL with the error record naming the line.
 */
int bpftext_parse(const char *text, size_t len, const char *filename, struct bpf_insn **ret,
		  size_t *ret_n);

/*
 * Raw instructions, 8 bytes each in host order (bpftool prog dump xlated id N file F).
 * Errors: -EINVAL for a trailing partial instruction or a program bpfvm_check() refuses.
 */
int bpftext_parse_raw(const void *data, size_t len, const char *filename, struct bpf_insn **ret,
		      size_t *ret_n);

/* True when @data looks like raw instructions rather than bpftool text (it has NUL bytes). */
bool bpftext_looks_raw(const void *data, size_t len);

/*
 * Map a kernel symbol or helper name as bpftool prints it in "call NAME#IMM" to the call
 * number bpfvm understands (a BPF_FUNC_* id or BPFVM_CALL_HTAB_ELEM). -1 when unknown.
 */
int bpftext_helper_from_name(const char *name);

/*
 * The kernel rewrites helper calls in translated programs to offsets from __bpf_call_base.
 * Translate such calls back to helper ids using /proc/kallsyms; calls that already carry a
 * small helper id are left alone. Returns the number of calls that stayed unresolved (the
 * error record then names the first one), or a negative errno if kallsyms could not be read
 * or hides addresses (kernel.kptr_restrict) when it was needed.
 */
int bpftext_resolve_calls(struct bpf_insn *insns, size_t n);

/* One line of /proc/kallsyms ("ADDRESS TYPE NAME [MODULE]") as bpftext_resolve_calls() keeps
 * it: KSYM_LINE_BASE for __bpf_call_base (its address in @ret_addr), KSYM_LINE_SYM for a text
 * symbol ('t' or 'T') that the decoder models or whose name starts "bpf_", of fewer than
 * KSYM_NAME_MAX bytes (its address, and its name in @ret_name), KSYM_LINE_OTHER for any other
 * line (outputs untouched). Apart from reading the file, so that the fuzz target reaches it. */
#define KSYM_NAME_MAX 64
enum { KSYM_LINE_OTHER, KSYM_LINE_BASE, KSYM_LINE_SYM };
int bpftext_kallsyms_line(const char *line, uint64_t *ret_addr, char *ret_name);
