/* jobcg: resolving the sd-bus functions from libsystemd.so.0 at run time (see sdbus_dl.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "sdbus_dl.h"
#include "util.h"

struct sdbus_api sdbus;

#define SYM(field, name)                                                                           \
	{                                                                                          \
		offsetof(struct sdbus_api, field), name, false                                     \
	}
#define OPTIONAL_SYM(field, name)                                                                  \
	{                                                                                          \
		offsetof(struct sdbus_api, field), name, true                                      \
	}
static const struct {
	size_t offset;
	const char *name;
	bool optional; /* NULL when missing: the caller does without */
} symbols[] = {
    SYM(bus_open_system, "sd_bus_open_system"),
    SYM(bus_flush_close_unref, "sd_bus_flush_close_unref"),
    SYM(bus_call, "sd_bus_call"),
    SYM(bus_call_method, "sd_bus_call_method"),
    SYM(bus_get_property_string, "sd_bus_get_property_string"),
    SYM(bus_match_signal, "sd_bus_match_signal"),
    SYM(bus_process, "sd_bus_process"),
    SYM(bus_wait, "sd_bus_wait"),
    SYM(bus_slot_unref, "sd_bus_slot_unref"),
    SYM(bus_message_new_method_call, "sd_bus_message_new_method_call"),
    SYM(bus_message_append, "sd_bus_message_append"),
    SYM(bus_message_open_container, "sd_bus_message_open_container"),
    SYM(bus_message_close_container, "sd_bus_message_close_container"),
    SYM(bus_message_read, "sd_bus_message_read"),
    SYM(bus_message_unref, "sd_bus_message_unref"),
    SYM(bus_error_has_name, "sd_bus_error_has_name"),
    SYM(bus_error_free, "sd_bus_error_free"),
    OPTIONAL_SYM(bus_set_method_call_timeout, "sd_bus_set_method_call_timeout"),
};
#undef SYM
#undef OPTIONAL_SYM

/* Every member is a function pointer and each has an entry above. */
_Static_assert(sizeof(struct sdbus_api) == sizeof(symbols) / sizeof(symbols[0]) * sizeof(void *),
	       "struct sdbus_api and symbols[] differ");

int sdbus_load_from(const char *soname, struct sdbus_api *ret)
{
	struct sdbus_api api;
	const char *why;
	void *h;

	/*
	 * RTLD_LOCAL: its symbols serve only our table, never the resolution of anything else;
	 * RTLD_NOW: a broken library fails here, with a message, not in the middle of a D-Bus call.
	 */
	h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		why = dlerror();
		return error_set(-ELIBACC,
				 "the systemd scope backend needs %s (install libsystemd0, or set "
				 "IgnoreSystemd=yes): %s",
				 soname, why ? why : "dlopen failed");
	}
	for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
		void *f;

		dlerror();
		f = dlsym(h, symbols[i].name);
		if (!f && !symbols[i].optional) {
			why = dlerror();
			error_set(-ELIBBAD,
				  "%s has no %s, which the systemd scope backend needs: %s", soname,
				  symbols[i].name, why ? why : "symbol is NULL");
			dlclose(h);
			return -ELIBBAD;
		}
		/* POSIX guarantees a function pointer survives the round trip through void *. */
		memcpy((char *)&api + symbols[i].offset, &f, sizeof(f));
	}
	*ret = api;
	return 0;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_result;
static char load_error[sizeof(((struct jobcg_error *)0)->message)];

static void load_once(void)
{
	load_result = sdbus_load_from(SDBUS_SONAME, &sdbus);
	if (load_result < 0)
		snprintf(load_error, sizeof(load_error), "%s", jobcg_last_error()->message);
}

int sdbus_load(void)
{
	pthread_once(&once, load_once);
	/* The error record is per thread: give every caller the message, not only the first. */
	if (load_result < 0)
		return error_set(load_result, "%s", load_error);
	return 0;
}
