// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * sverbs configuration: key = value lines, '#' comments.  Every key has an
 * environment variable SVERBS_<KEY> (upper case) that overrides the file;
 * "enable" is also plain SVERBS.  A problem is reported once and the key
 * keeps its previous (default) value.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sverbs_config.h"

#define MAX_LINE 512
#define MAX_FILE (64 * 1024)

enum value_kind { V_MODE, V_BOOL, V_UINT, V_SIZE, V_PRIO, V_LEVELS };

struct key_desc {
	const char *name;
	enum value_kind kind;
	size_t offset;
	uint32_t min;
	uint32_t max;
};

#define KEY(n, k, f, lo, hi)                                           \
	{                                                              \
		.name = n, .kind = k,                                  \
		.offset = __builtin_offsetof(struct sverbs_config, f), \
		.min = lo, .max = hi                                   \
	}

static const struct key_desc keys[] = {
	KEY("enable", V_MODE, mode, 0, 0),
	KEY("default_prio", V_PRIO, default_prio, 0, SVERBS_NUM_PRIO - 1),
	KEY("small_msg_bytes", V_SIZE, small_msg_bytes, 0, 1u << 30),
	KEY("slice_bytes", V_SIZE, slice_bytes, 0, 1u << 30),
	KEY("slice_min_bytes", V_SIZE, slice_min_bytes, 64, 1u << 30),
	KEY("slice_max_bytes", V_SIZE, slice_max_bytes, 64, 1u << 30),
	KEY("hol_target_us", V_UINT, hol_target_us, 1, 10000000),
	KEY("window_slices", V_UINT, window_slices, 1, 1024),
	KEY("window_signals", V_UINT, window_signals, 1, 1024),
	KEY("slice_grow_windows", V_UINT, slice_grow_windows, 0, 1024),
	KEY("slice_always", V_BOOL, slice_always, 0, 1),
	KEY("passthrough", V_BOOL, passthrough, 0, 1),
	KEY("cq_headroom", V_UINT, cq_headroom, 4, 65536),
	KEY("batch", V_BOOL, batch, 0, 1),
	KEY("batch_budget_us", V_UINT, batch_budget_us, 0, 1000000),
	KEY("batch_levels", V_LEVELS, batch_prio_mask, 0, 0),
	KEY("batch_linger", V_BOOL, batch_linger, 0, 1),
	KEY("batch_defer", V_BOOL, batch_defer, 0, 1),
	KEY("stats", V_BOOL, stats, 0, 1),
};

void sverbs_config_defaults(struct sverbs_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->mode = SVERBS_MODE_DEFAULT;
	cfg->default_prio = 4;
	cfg->small_msg_bytes = 0; /* opt-in: it reorders completions */
	cfg->slice_bytes = 0;
	cfg->slice_min_bytes = 4096;
	cfg->slice_max_bytes = 1u << 20;
	cfg->hol_target_us = 50;
	cfg->window_slices = 2;
	cfg->window_signals = 2;
	cfg->slice_grow_windows = 0;
	cfg->slice_always = false;
	cfg->passthrough = true;
	cfg->cq_headroom = 64;
	cfg->batch = true;
	cfg->batch_budget_us = 0;
	cfg->batch_prio_mask = 0xfe; /* every level but 0 may be held */
	cfg->batch_linger = true;
	cfg->batch_defer = true;
	cfg->stats = false;
}

static void report(sverbs_config_report_fn fn, void *arg, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void report(sverbs_config_report_fn fn, void *arg, const char *fmt, ...)
{
	char msg[MAX_LINE + 256];
	va_list ap;

	if (!fn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fn(arg, msg);
}

static const struct key_desc *find_key(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(keys[i].name, name))
			return &keys[i];
	return NULL;
}

static int parse_bool(const char *v, bool *out)
{
	static const char *const yes[] = { "1", "on", "yes", "true" };
	static const char *const no[] = { "0", "off", "no", "false" };
	size_t i;

	for (i = 0; i < 4; i++) {
		if (!strcasecmp(v, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(v, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

/* A decimal number with an optional k/m/g suffix (powers of 1024). */
static int parse_u32(const char *v, bool suffix, uint32_t *out)
{
	unsigned long long n, mult = 1;
	char *end;

	if (!isdigit((unsigned char)*v))
		return -1;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno)
		return -1;
	if (suffix && *end) {
		switch (tolower((unsigned char)*end)) {
		case 'k':
			mult = 1ull << 10;
			break;
		case 'm':
			mult = 1ull << 20;
			break;
		case 'g':
			mult = 1ull << 30;
			break;
		default:
			return -1;
		}
		end++;
		if (tolower((unsigned char)*end) == 'i')
			end++;
		if (tolower((unsigned char)*end) == 'b')
			end++;
	}
	if (*end || n > UINT32_MAX / mult)
		return -1;
	*out = (uint32_t)(n * mult);
	return 0;
}

/* "all", "none", or a list like "1-7" or "2,3,6". */
static int parse_levels(const char *v, uint32_t *out)
{
	uint32_t mask = 0, lo, hi;
	const char *p = v;
	char *end;

	if (!strcasecmp(v, "all")) {
		*out = (1u << SVERBS_NUM_PRIO) - 1;
		return 0;
	}
	if (!strcasecmp(v, "none")) {
		*out = 0;
		return 0;
	}
	while (*p) {
		if (!isdigit((unsigned char)*p))
			return -1;
		lo = hi = strtoul(p, &end, 10);
		if (*end == '-') {
			p = end + 1;
			if (!isdigit((unsigned char)*p))
				return -1;
			hi = strtoul(p, &end, 10);
		}
		if (lo > hi || hi >= SVERBS_NUM_PRIO)
			return -1;
		while (lo <= hi)
			mask |= 1u << lo++;
		p = end;
		if (*p == ',')
			p++;
		else if (*p)
			return -1;
	}
	*out = mask;
	return 0;
}

static const char *kind_hint(const struct key_desc *k)
{
	switch (k->kind) {
	case V_MODE:
		return "on or off";
	case V_BOOL:
		return "on/off, yes/no, true/false or 1/0";
	case V_SIZE:
		return "a size in bytes (e.g. 65536, 64k, 1m)";
	case V_PRIO:
		return "a priority level from 0 (highest) to 7";
	case V_LEVELS:
		return "a list of levels 0-7 such as 1-7 or 2,3 (or all, none)";
	default:
		return "a whole number";
	}
}

static int parse_value(const struct key_desc *k, const char *v, void *field)
{
	uint32_t n;
	bool b;

	switch (k->kind) {
	case V_MODE:
		if (parse_bool(v, &b))
			return -1;
		*(enum sverbs_mode *)field =
			b ? SVERBS_MODE_ON : SVERBS_MODE_OFF;
		return 0;
	case V_BOOL:
		if (parse_bool(v, &b))
			return -1;
		*(bool *)field = b;
		return 0;
	case V_LEVELS:
		if (parse_levels(v, &n))
			return -1;
		*(uint32_t *)field = n;
		return 0;
	case V_PRIO:
		if (parse_u32(v, false, &n) || n > k->max)
			return -1;
		*(unsigned int *)field = n;
		return 0;
	case V_SIZE:
	case V_UINT:
		if (parse_u32(v, k->kind == V_SIZE, &n))
			return -1;
		if (n < k->min || n > k->max)
			return -1;
		*(uint32_t *)field = n;
		return 0;
	}
	return -1;
}

int sverbs_config_set(struct sverbs_config *cfg, const char *key,
		      const char *value, const char *origin,
		      sverbs_config_report_fn fn, void *arg)
{
	const struct key_desc *k = find_key(key);

	if (!k) {
		report(fn, arg, "%s: unknown key '%s' ignored", origin, key);
		return -1;
	}
	if (parse_value(k, value, (char *)cfg + k->offset)) {
		if (k->kind == V_UINT || k->kind == V_SIZE)
			report(fn, arg,
			       "%s: %s: '%s' is not %s in [%u, %u]; ignored",
			       origin, key, value, kind_hint(k), k->min,
			       k->max);
		else
			report(fn, arg, "%s: %s: '%s' is not %s; ignored",
			       origin, key, value, kind_hint(k));
		return -1;
	}
	return 0;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static int parse_line(struct sverbs_config *cfg, char *line, const char *where,
		      sverbs_config_report_fn fn, void *arg)
{
	char *hash, *eq, *key, *value;

	hash = strchr(line, '#');
	if (hash)
		*hash = '\0';
	key = trim(line);
	if (!*key)
		return 0;
	eq = strchr(key, '=');
	if (!eq) {
		report(fn, arg, "%s: expected 'key = value', got '%s'", where,
		       key);
		return 1;
	}
	*eq = '\0';
	key = trim(key);
	value = trim(eq + 1);
	if (!*key || !*value) {
		report(fn, arg, "%s: expected 'key = value' with both present",
		       where);
		return 1;
	}
	return sverbs_config_set(cfg, key, value, where, fn, arg) ? 1 : 0;
}

int sverbs_config_parse_text(struct sverbs_config *cfg, const char *text,
			     const char *origin, sverbs_config_report_fn fn,
			     void *arg)
{
	char line[MAX_LINE + 1], where[256];
	const char *p = text, *nl;
	unsigned int lineno = 0;
	int problems = 0;
	size_t len;

	while (*p) {
		lineno++;
		nl = strchr(p, '\n');
		len = nl ? (size_t)(nl - p) : strlen(p);
		snprintf(where, sizeof(where), "%s:%u", origin, lineno);
		if (len > MAX_LINE) {
			report(fn, arg,
			       "%s: line longer than %d characters ignored",
			       where, MAX_LINE);
			problems++;
		} else {
			memcpy(line, p, len);
			line[len] = '\0';
			problems += parse_line(cfg, line, where, fn, arg);
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	return problems;
}

static int load_file(struct sverbs_config *cfg, const char *path,
		     sverbs_config_report_fn fn, void *arg)
{
	char *text;
	size_t n;
	FILE *f;
	int ret;

	f = fopen(path, "r");
	if (!f) {
		if (errno == ENOENT)
			return 0; /* no file: defaults */
		report(fn, arg, "%s: cannot read: %s; using defaults", path,
		       strerror(errno));
		return 1;
	}
	text = malloc(MAX_FILE + 1);
	if (!text) {
		fclose(f);
		return 1;
	}
	n = fread(text, 1, MAX_FILE, f);
	text[n] = '\0';
	if (n == MAX_FILE && fgetc(f) != EOF)
		report(fn, arg, "%s: longer than %d bytes; the rest is ignored",
		       path, MAX_FILE);
	fclose(f);
	ret = sverbs_config_parse_text(cfg, text, path, fn, arg);
	free(text);
	return ret;
}

/* SVERBS_SLICE_BYTES -> slice_bytes; SVERBS -> enable. */
static int env_to_key(const char *name, char *key, size_t size)
{
	size_t i;

	if (!strcmp(name, "SVERBS")) {
		snprintf(key, size, "enable");
		return 0;
	}
	if (strncmp(name, "SVERBS_", 7))
		return -1;
	name += 7;
	if (!strcmp(name, "CONF") || !strcmp(name, "PREFIX") ||
	    !strncmp(name, "VM_", 3))
		return -1; /* the file's path, env.sh's marker, the test bed's
			    * knobs (tests/vm): not keys */
	for (i = 0; name[i] && i + 1 < size; i++)
		key[i] = tolower((unsigned char)name[i]);
	key[i] = '\0';
	return 0;
}

int sverbs_config_load(struct sverbs_config *cfg, const char *path,
		       char *const *envp, sverbs_config_report_fn fn, void *arg)
{
	char name[128], key[128];
	int problems = 0;
	const char *eq;

	sverbs_config_defaults(cfg);
	if (path)
		problems += load_file(cfg, path, fn, arg);
	for (; envp && *envp; envp++) {
		eq = strchr(*envp, '=');
		if (!eq || (size_t)(eq - *envp) >= sizeof(name))
			continue;
		memcpy(name, *envp, eq - *envp);
		name[eq - *envp] = '\0';
		if (env_to_key(name, key, sizeof(key)))
			continue;
		problems += sverbs_config_set(cfg, key, eq + 1, name, fn, arg)
				    ? 1
				    : 0;
	}
	if (cfg->slice_min_bytes > cfg->slice_max_bytes) {
		report(fn, arg,
		       "slice_min_bytes %u is above slice_max_bytes %u; using "
		       "%u for both",
		       cfg->slice_min_bytes, cfg->slice_max_bytes,
		       cfg->slice_max_bytes);
		cfg->slice_min_bytes = cfg->slice_max_bytes;
		problems++;
	}
	return problems;
}
