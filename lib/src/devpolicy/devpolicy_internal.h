/* jobcg internal: the open device policy's object, shared by the files of devpolicy/ that
 * build, grant from and list it (policy.c, grants.c, listing.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices.h"

#define TREE_DEPTH_MAX	8	/* root/job/step/user/task is 4; leave room */
#define TREE_DIRS_MAX	200000u /* cgroups we are willing to walk when resolving ids */
#define POLICY_SCAN_MAX (DEVPROG_POLICY_MAX + 1024u)

struct jobcg_devpolicy {
	enum jobcg_device_program mode;
	char *root; /* absolute, canonical */
	uint64_t root_id;
	unsigned root_level; /* absolute cgroup level of the root */
	char *pin_dir;	     /* node mode */
	int prog_fd, managed_fd, policy_fd;
	uint32_t policy_id; /* node mode: the id of the map behind policy_fd */
	struct jobcg_devrule *managed;
	size_t n_managed;
	char *fallback_reason;
};

/* Canonical path of a cgroup v2 directory and its absolute level (depth below the v2 root). */
int devpolicy_cg_resolve(const char *path, char **ret_path, unsigned *ret_level);
/* Rules a grant or a managed set may hold: at most DEVPROG_RULES_MAX (-E2BIG), each valid,
 * allow rules only when MUST_ALLOW (-EINVAL naming the first that is not). */
int devpolicy_check_rules(const struct jobcg_devrule *r, size_t n, bool must_allow);
/* The linear programs (ours) attached to a cgroup, as descriptors; close with close_fds. */
int devpolicy_linear_progs_of(int cg_fd, int **ret_fds, size_t *ret_n);
void devpolicy_close_fds(int *fds, size_t n);
/* A policy map key and its access bits as a device rule. */
int devpolicy_rule_from_key(uint32_t type, uint32_t major, uint32_t minor, unsigned access,
			    struct jobcg_devrule *r);

struct devprog_policy_key;
/* A cgroup's index of its policy map entries (trusted.jobcg.devkeys, @size bytes at @buf): 0 and
 * its entries for cgroup @id, every one of them @id's and none a marker (to free()); 1 when it is
 * no usable index of @id (the map walk is then the answer). */
int devkeys_parse(const void *buf, size_t size, uint64_t id, struct devprog_policy_key **ret,
		  size_t *ret_n);
