/*
 * jobcg internal: the sd-bus functions the systemd scope backend uses, resolved from
 * libsystemd.so.0 with dlopen() on first use instead of linked. Every step exec()s jobcg, and
 * libsystemd with its six libraries costs the dynamic loader more than the step's cgroup work;
 * only `jobcg init` on a systemd host (or the first command there that ensures the tree) needs it.
 * The types come from libsystemd's headers; no sd_* symbol is referenced at link time.
 */
#pragma once

#include <systemd/sd-bus.h>

/* The library's soname: what the error message names when it cannot be loaded. */
#define SDBUS_SONAME "libsystemd.so.0"

/* One pointer per function, named as in libsystemd without the "sd_" prefix. */
struct sdbus_api {
	__typeof__(sd_bus_open_system) *bus_open_system;
	__typeof__(sd_bus_flush_close_unref) *bus_flush_close_unref;
	__typeof__(sd_bus_call) *bus_call;
	__typeof__(sd_bus_call_method) *bus_call_method;
	__typeof__(sd_bus_get_property_string) *bus_get_property_string;
	__typeof__(sd_bus_match_signal) *bus_match_signal;
	__typeof__(sd_bus_process) *bus_process;
	__typeof__(sd_bus_wait) *bus_wait;
	__typeof__(sd_bus_slot_unref) *bus_slot_unref;
	__typeof__(sd_bus_message_new_method_call) *bus_message_new_method_call;
	__typeof__(sd_bus_message_append) *bus_message_append;
	__typeof__(sd_bus_message_open_container) *bus_message_open_container;
	__typeof__(sd_bus_message_close_container) *bus_message_close_container;
	__typeof__(sd_bus_message_read) *bus_message_read;
	__typeof__(sd_bus_message_unref) *bus_message_unref;
	__typeof__(sd_bus_error_has_name) *bus_error_has_name;
	__typeof__(sd_bus_error_free) *bus_error_free;
	/* Optional (libsystemd 240 and later): NULL when the library lacks it. Declared here, as
	 * older headers do not. */
	int (*bus_set_method_call_timeout)(sd_bus *bus, uint64_t usec);
};

/* Filled by a successful sdbus_load(); all NULL before. */
extern struct sdbus_api sdbus;

/*
 * Load libsystemd.so.0 (once per process; thread-safe) and fill `sdbus`. 0 on success; when the
 * library or one of the functions is missing, -ELIBACC or -ELIBBAD with the error record naming
 * the library and dlerror()'s reason, every time it is called.
 */
int sdbus_load(void);

/*
 * The work of sdbus_load() for any @soname, into *ret (untouched on failure); the handle stays
 * open on success. For tests: a missing library, or a library without the functions.
 */
int sdbus_load_from(const char *soname, struct sdbus_api *ret);
