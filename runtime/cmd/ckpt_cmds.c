/*
 * ckpt_cmds.c - dtrain-ckpt's file commands: list, verify, inspect and
 * export the checkpoints that dtrain-run writes (format in
 * checkpoint/ckpt.h, guide in docs/checkpoints.md). The program itself
 * (ckpt_main.c) adds eval and sample, which run the checkpoint's model.
 * Each command parses its command line, calls checkpoint/ckpt.h and maps
 * errors to exit codes (base/err.h):
 * 0 success, 1 failure (damaged or missing checkpoint, I/O error), 2 usage
 * error.
 *
 * Sections: messages, option parsing, finding checkpoints, commands, the
 * command table.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/ckpt.h"
#include "runtime/cmd/ckpt_cmds.h"
#include "jobs/spec.h"
#include "base/cli.h"
#include "base/err.h"

const char rt_ckpt_usage[] =
	"usage: dtrain-ckpt [--help] [--version] COMMAND [ARGS]\n"
	"\n"
	"Lists, checks and converts dtrain checkpoints: directories step-<8 digits>\n"
	"holding one HDF5 shard per pipeline stage, a root model.h5 and\n"
	"MANIFEST.json (see docs/checkpoints.md).\n"
	"\n"
	"Commands:\n"
	"  list DIR [--verify]        the checkpoints of a run directory or checkpoint dir\n"
	"  verify CKPT                check every file of a checkpoint against its manifest\n"
	"  inspect CKPT               step, optimizer, layout and every tensor's shape\n"
	"  export CKPT OUT            the whole model as one file: HDF5, or safetensors\n"
	"                             (Hugging Face's names) with --format safetensors\n"
	"  import SRC OUT_DIR         a Hugging Face or llm.c GPT-2 as a checkpoint\n"
	"  eval CKPT DATA             the model's loss (and logits) on a data set or token stream\n"
	"  sample CKPT [--prompt T]   text from a language model (model.type \"gpt\" or \"llama\")\n"
	"\n"
	"CKPT is a checkpoint (.../step-00000120), or a run directory or checkpoint\n"
	"dir, which stands for its newest checkpoint.\n"
	"\"dtrain-ckpt COMMAND --help\" shows the options of a command.\n"
	"\n"
	"Exit codes:\n"
	"  0   success\n"
	"  1   failure: not a checkpoint, damaged checkpoint, I/O error\n"
	"  2   usage error\n";

static const char usage_list[] =
	"usage: dtrain-ckpt list RUN_DIR|CKPT_DIR [--verify]\n"
	"\n"
	"Lists the committed checkpoints, newest first: step (optimizer steps\n"
	"taken), epoch (that of the last step, counted from 1 as in the progress\n"
	"lines), size (the files of the manifest), when it was written, the\n"
	"layout it was written with (data x pipeline) and its status. \"*\" marks\n"
	"the one that the `latest` symlink names.\n"
	"\n"
	"RUN_DIR is a dtrain run directory: its checkpoints are where its\n"
	"spec.json says (checkpoint.dir), else in RUN_DIR/checkpoints. A directory\n"
	"that holds step-* directories itself is taken as the checkpoint dir.\n"
	"\n"
	"STATUS is \"ok\" when the manifest reads and every file has the size it\n"
	"lists, else \"damaged: \" and the first problem. The checksums are only\n"
	"read with --verify (it reads every byte).\n"
	"\n"
	"Options:\n"
	"  --verify    also check every file's CRC-32 against the manifest\n"
	"  -h, --help  this text\n"
	"\n"
	"Exit codes: 0 listed (also when some are damaged, or there are none),\n"
	"1 the directory cannot be read, 2 usage error.\n";

static const char usage_verify[] =
	"usage: dtrain-ckpt verify CKPT\n"
	"\n"
	"Checks a checkpoint the way resuming does: the manifest (format,\n"
	"version, every field) and every file it lists (present, its size, its\n"
	"CRC-32), then reads every tensor (parameters and optimizer state): a NaN\n"
	"or an infinity is damage, which resuming, init_from, eval and sample\n"
	"refuse (also in an `import --allow-nonfinite`). Prints \"CKPT: ok (...)\"\n"
	"or every problem, one per line, naming the file. CKPT may be a run\n"
	"directory or checkpoint dir: its newest checkpoint is checked.\n"
	"\n"
	"Options:\n"
	"  -h, --help  this text\n"
	"\n"
	"Exit codes: 0 intact, 1 damaged (non-finite values included) or not a\n"
	"checkpoint, 2 usage error.\n";

static const char usage_inspect[] =
	"usage: dtrain-ckpt inspect CKPT\n"
	"\n"
	"Prints what a checkpoint holds, from its manifest and files: step,\n"
	"epoch, learning rate, optimizer, the model, the layout and how the blocks were\n"
	"split over the stages, the spec and model hashes, and every tensor with\n"
	"its shape and the shard that holds it. CKPT may be a run directory or\n"
	"checkpoint dir (its newest checkpoint). Every file is then checked as\n"
	"verify checks it: the summary ends with \"status ok\", or for a damaged\n"
	"checkpoint \"status damaged: FILES\" with each problem named on stderr.\n"
	"\n"
	"Options:\n"
	"  -h, --help  this text\n"
	"\n"
	"Exit codes: 0 printed, intact; 1 damaged, not a checkpoint or unreadable;\n"
	"2 usage error.\n";

static const char usage_export[] =
	"usage: dtrain-ckpt export CKPT OUT.h5 [--force]\n"
	"\n"
	"Verifies CKPT, then writes its whole model (parameters and optimizer\n"
	"state, the same paths and attributes as CKPT/model.h5) into OUT.h5 as\n"
	"ordinary datasets: one file that can be copied anywhere and read with\n"
	"h5py or h5dump without the shards. OUT.h5 appears complete or not at all.\n"
	"CKPT may be a run directory or checkpoint dir (its newest checkpoint).\n"
	"\n"
	"Options:\n"
	"  -f, --force  overwrite OUT.h5 if it exists\n"
	"  -h, --help   this text\n"
	"\n"
	"Exit codes: 0 written, 1 damaged checkpoint, OUT.h5 exists or cannot be\n"
	"written, 2 usage error.\n";

/* --- messages --- */

static void print_err(const struct dt_err *err)
{
	dt_err_print("dtrain-ckpt", "", err);
}

/* The report, or strerror(-rc) when the library left none. */
static int fail(struct dt_err *err, int rc, const char *what)
{
	if (err->count == 0)
		dt_err_add(err, "%s: %s", what, strerror(rc < 0 ? -rc : EIO));
	print_err(err);
	return DT_EXIT_FAIL;
}

static int usage_error(const char *usage, const char *fmt, const char *arg)
{
	return dt_usage_error("dtrain-ckpt", usage, fmt, arg);
}

/* "812 B", "41.2 KiB", "380.5 MiB", "12.0 GiB" */
static void human_size(uint64_t bytes, char *out, size_t size)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(out, size, "%" PRIu64 " B", bytes);
		return;
	}
	while (v >= 1024 && u < 3) {
		v /= 1024;
		u++;
	}
	snprintf(out, size, "%.1f %s", v, units[u]);
}

/* --- option parsing --- */

/* getopt_long over one command's arguments: flag (may be NULL) is set by
 * its long option. 1 when --help was asked, 0 on success, else the usage
 * exit code (message printed). */
static int parse_opts(int argc, char **argv, const char *usage, const char *flag_name,
		      int flag_short, bool *flag, int want_args)
{
	struct option opts[3];
	char shorts[8] = ":h";
	int c, n = 0;

	if (flag_name) {
		opts[n++] = (struct option){ flag_name, no_argument, NULL, 'F' };
		if (flag_short) {
			shorts[2] = (char)flag_short;
			shorts[3] = '\0';
		}
	}
	opts[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	opts[n] = (struct option){ NULL, 0, NULL, 0 };
	opterr = 0;
	while ((c = getopt_long(argc, argv, shorts, opts, NULL)) != -1) {
		if (c == 'h') {
			fputs(usage, stdout);
			return 1;
		}
		if (c == 'F' || (flag_short && c == flag_short))
			*flag = true;
		else
			return dt_unknown_option("dtrain-ckpt", usage, argv[optind - 1], opts);
	}
	if (argc - optind != want_args)
		return usage_error(usage, "%s", argc - optind < want_args ? "missing argument" :
				   "too many arguments");
	if (!*argv[optind])
		return usage_error(usage, "%s", "empty path");
	return 0;
}

/* --- finding checkpoints --- */

/* dir/name into out; false when it does not fit (the caller's path is
 * then too long to be a checkpoint's). */
static bool join(char *out, size_t size, const char *dir, const char *name)
{
	int n = snprintf(out, size, "%s/%s", dir, name);

	return n >= 0 && (size_t)n < size;
}

static bool is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static bool is_checkpoint(const char *path)
{
	char p[PATH_MAX];

	return join(p, sizeof(p), path, CKPT_MANIFEST) && exists(p);
}

/* The checkpoint dir of a run directory or checkpoint dir (ckpt_dir_of);
 * a spec.json that cannot be read is reported as a warning. */
static void checkpoint_dir(const char *path, char *out, size_t size)
{
	struct dt_err warn = { 0 };

	ckpt_dir_of(path, out, size, &warn);
	print_err(&warn);
}

/* ckpt_resolve, saying which checkpoint a directory stood for. */
static int resolve_ckpt(const char *path, char *out, size_t size, struct dt_err *err)
{
	struct dt_err warn = { 0 };
	bool newest = false;
	int rc = ckpt_resolve(path, out, size, &newest, &warn, err);

	print_err(&warn);
	if (!rc && newest)
		fprintf(stderr, "dtrain-ckpt: %s: using its newest checkpoint, %s\n", path, out);
	return rc;
}

/* --- commands --- */

/* The STATUS of one checkpoint: "ok" or "damaged: <first problem>", and
 * the size of its files (the manifest's). true when *m could be read. */
static bool list_status(const char *ckpt, bool full, struct ckpt_manifest *m, char *status,
			size_t size, uint64_t *bytes)
{
	struct dt_err err = { 0 };
	const char *why;
	size_t plen = strlen(ckpt);
	bool read;
	int i, rc;

	*bytes = 0;
	rc = ckpt_manifest_read(ckpt, m, &err);
	read = rc == 0;
	if (read) {
		for (i = 0; i < m->n_files; i++)
			*bytes += m->files[i].size;
		if (full) {
			rc = ckpt_verify(ckpt, true, &err);
		} else {
			for (i = 0; i < m->n_files && rc == 0; i++) {
				char p[PATH_MAX];
				struct stat st;

				/* the wording of ckpt_verify_file's messages */
				if (!join(p, sizeof(p), ckpt, m->files[i].name) || stat(p, &st))
					rc = dt_err_add(&err, "%s: %s", m->files[i].name,
							errno == ENOENT ? "missing" : strerror(errno));
				else if ((uint64_t)st.st_size != m->files[i].size)
					rc = dt_err_add(&err, "%s: size %lld bytes, manifest says %" PRIu64
							" (truncated or replaced)", m->files[i].name,
							(long long)st.st_size, m->files[i].size);
			}
		}
	}
	if (rc == 0) {
		snprintf(status, size, "ok");
		return read;
	}
	/* the first line, without the checkpoint's own path in front */
	why = err.count ? err.msg : strerror(-rc);
	if (!strncmp(why, ckpt, plen) && why[plen] == '/')
		why += plen + 1;
	snprintf(status, size, "damaged: %.*s", (int)strcspn(why, "\n"), why);
	return read;
}

/* The step the latest symlink of dir names, -1 when none. */
static int64_t latest_step(const char *dir)
{
	char p[PATH_MAX], target[256];
	ssize_t n;
	long long step;
	char *end;

	if (!join(p, sizeof(p), dir, "latest"))
		return -1;
	n = readlink(p, target, sizeof(target) - 1);
	if (n <= 0)
		return -1;
	target[n] = '\0';
	if (strncmp(target, "step-", 5))
		return -1;
	errno = 0;
	step = strtoll(target + 5, &end, 10);
	return (errno || *end || end == target + 5) ? -1 : (int64_t)step;
}

/* Leftovers of an interrupted save: .step-*.tmp directories. */
static int count_tmp(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)) != NULL) {
		size_t len = strlen(e->d_name);

		n += !strncmp(e->d_name, ".step-", 6) && len > 4 && !strcmp(e->d_name + len - 4, ".tmp");
	}
	closedir(d);
	return n;
}

/* The note on a crash's leftovers, when there are any. */
static void print_tmp(int tmp)
{
	if (tmp)
		printf("(%d incomplete save%s: .step-*.tmp, removed by the next save)\n", tmp,
		       tmp == 1 ? "" : "s");
}

/* One checkpoint's line of the listing; m is scratch space. */
static void list_row(const char *dir, int64_t step, int64_t latest, bool full,
		     struct ckpt_manifest *m)
{
	char ckpt[PATH_MAX], name[32], status[512];
	char epoch[24] = "-", size[32] = "-", layout[32] = "-";
	uint64_t bytes = 0;
	bool read = false;

	ckpt_step_name(step, name, sizeof(name));
	memset(m, 0, sizeof(*m));
	if (join(ckpt, sizeof(ckpt), dir, name))
		read = list_status(ckpt, full, m, status, sizeof(status), &bytes);
	else
		snprintf(status, sizeof(status), "damaged: %s", strerror(ENAMETOOLONG));
	if (read) {
		/* as the progress lines count: the last step's epoch, from 1 */
		if (m->meta.step > 0 && m->meta.steps_per_epoch > 0)
			snprintf(epoch, sizeof(epoch), "%" PRId64,
				 (m->meta.step - 1) / m->meta.steps_per_epoch + 1);
		else
			snprintf(epoch, sizeof(epoch), "0");
		human_size(bytes, size, sizeof(size));
		snprintf(layout, sizeof(layout), "%dx%d", m->meta.data, m->meta.pipeline);
	}
	printf("%c %-10" PRId64 " %-6s %-10s %-21s %-7s %s\n", step == latest ? '*' : ' ', step,
	       epoch, size, read && m->meta.created[0] ? m->meta.created : "-", layout, status);
}

static int cmd_list(int argc, char **argv)
{
	struct ckpt_manifest *m = NULL;
	struct dt_err err = { 0 };
	char dir[PATH_MAX], ckpt[PATH_MAX], name[32];
	const char *path;
	int64_t *steps = NULL, latest;
	bool full = false;
	int rc, i, n = 0, tmp, status_rc = DT_EXIT_FAIL;

	rc = parse_opts(argc, argv, usage_list, "verify", 0, &full, 1);
	if (rc)
		return rc == 1 ? DT_EXIT_OK : rc;
	path = argv[optind];
	if (!is_dir(path)) {
		dt_err_add(&err, "%s: %s", path, exists(path) ? "not a directory" : strerror(ENOENT));
		goto out;
	}
	if (is_checkpoint(path)) {
		dt_err_add(&err, "%s: is one checkpoint; list takes the directory that holds them "
			   "(try 'dtrain-ckpt inspect %s')", path, path);
		goto out;
	}
	checkpoint_dir(path, dir, sizeof(dir));
	rc = ckpt_list(dir, &steps, &n, &err);
	if (rc) {
		if (err.count == 0)
			dt_err_add(&err, "%s: %s", dir, strerror(-rc));
		goto out;
	}
	tmp = count_tmp(dir);
	if (n == 0) {
		printf("no checkpoints in %s\n", dir);
		print_tmp(tmp);
		status_rc = DT_EXIT_OK;
		goto out;
	}
	m = malloc(sizeof(*m));
	if (!m) {
		dt_err_add(&err, "out of memory");
		goto out;
	}
	latest = latest_step(dir);
	printf("checkpoints in %s:\n", dir);
	printf("  %-10s %-6s %-10s %-21s %-7s %s\n", "STEP", "EPOCH", "SIZE", "CREATED", "LAYOUT",
	       "STATUS");
	for (i = 0; i < n; i++)
		list_row(dir, steps[i], latest, full, m);
	if (latest >= 0) {
		ckpt_step_name(latest, name, sizeof(name));
		printf("* latest -> %s%s\n", name,
		       join(ckpt, sizeof(ckpt), dir, name) && is_dir(ckpt) ? "" : " (missing)");
	}
	print_tmp(tmp);
	status_rc = DT_EXIT_OK;
out:
	if (status_rc)
		print_err(&err);
	free(m);
	free(steps);
	return status_rc;
}

/* Every value of every tensor finite (parameters and optimizer states),
 * as the readers require (ckpt_read_rows checks): a line for each tensor
 * that is not, naming its file and dataset. Run after ckpt_verify. */
static int verify_values(const char *ckpt, struct dt_err *err)
{
	struct ckpt_reader r = { 0 };
	const struct ckpt_tensor *t;
	float *buf = NULL;
	size_t most = 1;
	int i, s, rc, bad = 0;

	rc = ckpt_reader_open(&r, ckpt, err);
	for (i = 0; !rc && i < r.m->n_tensors; i++)
		if (ckpt_tensor_floats(&r.m->tensors[i]) > most)
			most = ckpt_tensor_floats(&r.m->tensors[i]);
	if (!rc && !(buf = malloc(most * sizeof(float))))
		rc = -ENOMEM;
	for (i = 0; !rc && i < r.m->n_tensors; i++) {
		t = &r.m->tensors[i];
		for (s = -1; s < r.m->meta.n_states; s++)
			if (ckpt_read_rows(&r, t, s, 0, t->shape[0], buf, err)) {
				bad++;
				break;
			}
	}
	free(buf);
	ckpt_reader_close(&r);
	return rc ? rc : bad ? -EINVAL : 0;
}

static int cmd_verify(int argc, char **argv)
{
	struct ckpt_manifest *m = NULL;
	struct dt_err err = { 0 };
	char ckpt[PATH_MAX], size[32];
	uint64_t bytes = 0;
	int rc, i;

	rc = parse_opts(argc, argv, usage_verify, NULL, 0, NULL, 1);
	if (rc)
		return rc == 1 ? DT_EXIT_OK : rc;
	rc = resolve_ckpt(argv[optind], ckpt, sizeof(ckpt), &err);
	if (!rc)
		rc = ckpt_verify(ckpt, false, &err);
	if (!rc)
		rc = verify_values(ckpt, &err);
	if (rc)
		return fail(&err, rc, ckpt);
	m = malloc(sizeof(*m));
	if (!m)
		return fail(&err, -ENOMEM, ckpt);
	rc = ckpt_manifest_read(ckpt, m, &err);
	if (rc) {
		free(m);
		return fail(&err, rc, ckpt);
	}
	for (i = 0; i < m->n_files; i++)
		bytes += m->files[i].size;
	human_size(bytes, size, sizeof(size));
	printf("%s: ok (%d files, %s, step %" PRId64 ")\n", ckpt, m->n_files, size, m->meta.step);
	free(m);
	return DT_EXIT_OK;
}

static int cmd_inspect(int argc, char **argv)
{
	struct dt_err err = { 0 };
	char ckpt[PATH_MAX];
	int rc;

	rc = parse_opts(argc, argv, usage_inspect, NULL, 0, NULL, 1);
	if (rc)
		return rc == 1 ? DT_EXIT_OK : rc;
	rc = resolve_ckpt(argv[optind], ckpt, sizeof(ckpt), &err);
	if (!rc)
		rc = ckpt_inspect(ckpt, stdout, &err);
	return rc ? fail(&err, rc, ckpt) : DT_EXIT_OK;
}

/* The directory a file path is in: "." for a plain name. */
static void parent_of(const char *path, char *out, size_t size)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(out, size, ".");
	else
		snprintf(out, size, "%.*s", (int)(slash - path + (slash == path)), path);
}

/* Is the directory parent the checkpoint ckpt? (Never add files to one.) */
static bool same_dir(const char *parent, const char *ckpt)
{
	char a[PATH_MAX], b[PATH_MAX];

	return realpath(parent, a) && realpath(ckpt, b) && !strcmp(a, b);
}

static int cmd_export(int argc, char **argv)
{
	struct ckpt_manifest *m = NULL;
	struct dt_err err = { 0 };
	char ckpt[PATH_MAX], parent[PATH_MAX], size[32];
	const char *out;
	bool force = false;
	struct stat st;
	int rc, status = DT_EXIT_FAIL;

	rc = parse_opts(argc, argv, usage_export, "force", 'f', &force, 2);
	if (rc)
		return rc == 1 ? DT_EXIT_OK : rc;
	out = argv[optind + 1];
	if (!*out)
		return usage_error(usage_export, "%s", "empty path");
	rc = resolve_ckpt(argv[optind], ckpt, sizeof(ckpt), &err);
	if (rc)
		goto out;
	parent_of(out, parent, sizeof(parent));
	if (!is_dir(parent)) {
		dt_err_add(&err, "%s: the directory %s does not exist", out, parent);
		goto out;
	}
	if (is_dir(out)) {
		dt_err_add(&err, "%s: is a directory; give the name of the file to write", out);
		goto out;
	}
	if (exists(out) && !force) {
		dt_err_add(&err, "%s: exists; use --force to overwrite it", out);
		goto out;
	}
	if (same_dir(parent, ckpt)) {
		dt_err_add(&err, "%s: is inside the checkpoint %s; checkpoints are never changed, "
			   "write it elsewhere", out, ckpt);
		goto out;
	}
	m = malloc(sizeof(*m));
	if (!m) {
		rc = -ENOMEM;
		goto out;
	}
	rc = ckpt_export(ckpt, out, &err);
	if (rc)
		goto out;
	rc = ckpt_manifest_read(ckpt, m, &err);
	if (rc)
		goto out;
	if (stat(out, &st)) {
		rc = -errno;
		dt_err_add(&err, "%s: %s", out, strerror(errno));
		goto out;
	}
	human_size((uint64_t)st.st_size, size, sizeof(size));
	printf("wrote %s (%s, %d tensors)\n", out, size, m->n_tensors * (1 + m->meta.n_states));
	status = DT_EXIT_OK;
out:
	if (status)
		fail(&err, rc, ckpt);
	free(m);
	return status;
}

/* --- the command table --- */

const struct dt_cmd rt_ckpt_cmds[] = {
	{ "list", cmd_list },
	{ "verify", cmd_verify },
	{ "inspect", cmd_inspect },
	{ "export", cmd_export },
};
const size_t rt_ckpt_n_cmds = sizeof(rt_ckpt_cmds) / sizeof(rt_ckpt_cmds[0]);
