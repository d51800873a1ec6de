/* shoal-stepd-exec: the last step of starting a batch script, run by its supervisor (noded.stepd).
 *
 * Forking the supervisor (a 17 MB Python) for each job costs more CPU than the rest of the launch
 * (page tables copied, copy-on-write faults, the copy torn down at exec). So the supervisor spawns
 * this small program instead (vfork + exec: nothing of its memory is copied), writes its pid into
 * the job's cgroups and spool, and then lets it go. Here, still root: wait for the go, become the
 * job's user (groups, gid, uid) after setting the resource limits carried from the submitting
 * process (lowered to the node's hard ones), set the umask, open the job's streams as that user, enter the
 * working directory (or /tmp, saying so on the job's stderr), add SLURM_TASK_PID to the environment
 * and exec the script, which thus starts in its cgroups with its pid on record.
 *
 * A failure before the script runs is told on ERR_FD, which is close-on-exec (the supervisor reads
 * end-of-file once the script runs), and ends this program with status 1; the supervisor records it.
 * An exec that fails (a bad interpreter line) is the job's own failure, as in Slurm 22.05: said on
 * the job's stderr, and the exit status is the errno (ENOENT: the job ends FAILED 2:0).
 *
 * argv: GO_FD ERR_FD UID GID GROUPS UMASK OPEN_MODE STDIN STDOUT STDERR CWD SCRIPT [ARG...]
 *   GROUPS: the supplementary gids, comma-separated (set only when running as root)
 *   UMASK: octal; OPEN_MODE: "append" or "truncate"
 * environment: the job's, and SHOAL_EXEC_RLIMITS (taken out before exec): "RESOURCE=SOFT[:u|:h],..."
 *   (shoal.rlimits.exec_argument; SOFT -1 = unlimited; ":u": asked for with --propagate, a refusal
 *   is said on the job's stderr; ":h": the memory cap, soft and hard, never above the hard limit).
 *   In the environment, not argv, so that a helper and a supervisor of different versions still
 *   start jobs (an older helper takes a ":h" item as a soft limit).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_GROUPS 65536
#define RLIMITS_VARIABLE "SHOAL_EXEC_RLIMITS" /* shoal.rlimits.EXEC_VARIABLE */
#define OPEN_FAILED "Could not open " /* noded.stepd.STREAM_OPEN_FAILED: the job ends 0:53 */

static int err_fd = -1;

static void fail(const char *message) {
    if (err_fd >= 0) {
        ssize_t unused = write(err_fd, message, strlen(message));
        (void)unused;
    }
    _exit(1);
}

static void fail_errno(const char *what, const char *path) {
    char message[4096];
    int saved = errno;
    if (path != NULL)
        snprintf(message, sizeof message, "%s%s: %s", what, path, strerror(saved));
    else
        snprintf(message, sizeof message, "launch failed: %s: %s", what, strerror(saved));
    fail(message);
}

static long number(const char *text, int base) {
    char *end;
    errno = 0;
    long value = strtol(text, &end, base);
    if (errno != 0 || *text == '\0' || *end != '\0') fail("launch failed: bad argument");
    return value;
}

static int open_stream(const char *path, int flags, const char *what) {
    int fd = open(path, flags, 0644);
    if (fd < 0) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, OPEN_FAILED "%s file ", what);
        fail_errno(prefix, path);
    }
    return fd;
}

static void become(uid_t uid, gid_t gid, const char *group_list) {
    if (geteuid() != 0) {
        if (geteuid() != uid) {
            char message[128];
            snprintf(message, sizeof message, "cannot run a job of uid %u as uid %u", (unsigned)uid,
                     (unsigned)geteuid());
            fail(message);
        }
        return;
    }
    static gid_t groups[MAX_GROUPS];
    size_t count = 0;
    char *copy = strdup(group_list), *save = NULL;
    if (copy == NULL) fail_errno("strdup", NULL);
    for (char *item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        if (count == MAX_GROUPS) fail("launch failed: too many groups");
        groups[count++] = (gid_t)number(item, 10);
    }
    free(copy);
    if (setgroups(count, groups) != 0) fail_errno("setgroups", NULL);
    if (setgid(gid) != 0) fail_errno("setgid", NULL);
    if (setuid(uid) != 0) fail_errno("setuid", NULL);
}

static char refusals[4096]; /* said on the job's stderr once it is open */

static const char *limit_name(int resource) {
    switch (resource) {
    case RLIMIT_CPU: return "CPU";
    case RLIMIT_FSIZE: return "FSIZE";
    case RLIMIT_DATA: return "DATA";
    case RLIMIT_STACK: return "STACK";
    case RLIMIT_CORE: return "CORE";
    case RLIMIT_RSS: return "RSS";
    case RLIMIT_NPROC: return "NPROC";
    case RLIMIT_NOFILE: return "NOFILE";
    case RLIMIT_MEMLOCK: return "MEMLOCK";
    case RLIMIT_AS: return "AS";
    default: return "?";
    }
}

/* Set each soft limit of RLIMITS, up to the hard limit (this runs as root, before become()); an
 * item marked ":h" lowers the hard limit to it as well. */
static void set_limits(const char *spec) {
    char *copy = strdup(spec), *save = NULL;
    if (copy == NULL) fail_errno("strdup", NULL);
    for (char *item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        char *value = strchr(item, '=');
        if (value == NULL) fail("launch failed: bad argument");
        *value++ = '\0';
        char *mark = strchr(value, ':');
        int asked = mark != NULL && strcmp(mark, ":u") == 0;
        int capped = mark != NULL && strcmp(mark, ":h") == 0;
        if (mark != NULL) *mark = '\0';
        int resource = (int)number(item, 10);
        long long soft = strtoll(value, NULL, 10);
        struct rlimit limit;
        if (getrlimit(resource, &limit) != 0) continue;
        rlim_t want = soft < 0 ? RLIM_INFINITY : (rlim_t)soft;
        rlim_t set = (limit.rlim_max != RLIM_INFINITY && (want == RLIM_INFINITY || want > limit.rlim_max))
                         ? limit.rlim_max
                         : want;
        limit.rlim_cur = set;
        if (capped) limit.rlim_max = set;
        int failed = setrlimit(resource, &limit) != 0;
        if (asked && (failed || set != want)) {
            size_t used = strlen(refusals);
            snprintf(refusals + used, sizeof refusals - used,
                     "slurmstepd: error: Can't propagate RLIMIT_%s of '%s' from submit host: %s\n",
                     limit_name(resource), soft < 0 ? "18446744073709551615" : value, strerror(failed ? errno : EPERM));
        }
    }
    free(copy);
}

/* The interpreter a script's "#!" line names, into `out` ("" if it has none). */
static void interpreter(const char *script, char *out, size_t size) {
    out[0] = '\0';
    char head[512];
    int fd = open(script, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t got = read(fd, head, sizeof head - 1);
    close(fd);
    if (got < 2 || head[0] != '#' || head[1] != '!') return;
    head[got] = '\0';
    char *start = head + 2;
    while (*start == ' ' || *start == '\t') start++;
    size_t len = strcspn(start, " \t\r\n");
    snprintf(out, size, "%.*s", (int)len, start);
}

/* glibc's posix_spawn leaves its two internal signals (the kernel's 32 and 33: thread cancellation
 * and set*id across threads) ignored in the child, and an ignored signal stays ignored across exec;
 * glibc's sigaction refuses them, so the kernel is asked directly (all-zero: SIG_DFL, no flags). */
static void default_internal_signals(void) {
    static const unsigned long dfl[8];
    for (int sig = 32; sig <= 33; sig++) syscall(SYS_rt_sigaction, sig, dfl, NULL, sizeof(unsigned long));
}

int main(int argc, char **argv) {
    if (argc < 13) {
        fprintf(stderr, "usage: shoal-stepd-exec GO_FD ERR_FD UID GID GROUPS UMASK OPEN_MODE STDIN STDOUT "
                        "STDERR CWD SCRIPT [ARG...]\n");
        return 2;
    }
    err_fd = (int)number(argv[2], 10);
    if (fcntl(err_fd, F_SETFD, FD_CLOEXEC) != 0) return 1;
    int go_fd = (int)number(argv[1], 10);
    char go;
    if (read(go_fd, &go, 1) != 1) _exit(1); /* the supervisor decided not to start the job */
    close(go_fd);

    const char *limits = getenv(RLIMITS_VARIABLE);
    if (limits != NULL) {
        set_limits(limits);
        unsetenv(RLIMITS_VARIABLE);
    }
    become((uid_t)number(argv[3], 10), (gid_t)number(argv[4], 10), argv[5]);
    umask((mode_t)number(argv[6], 8));
    int out_flags = O_WRONLY | O_CREAT | (strcmp(argv[7], "append") == 0 ? O_APPEND : O_TRUNC);
    const char *in_path = argv[8], *out_path = argv[9], *err_path = argv[10];
    int fd_in = open_stream(in_path, O_RDONLY, "stdin");
    int fd_out = open_stream(out_path, out_flags, "stdout");
    int fd_err = strcmp(err_path, out_path) == 0 ? fd_out : open_stream(err_path, out_flags, "stderr");
    if (dup2(fd_in, 0) < 0 || dup2(fd_out, 1) < 0 || dup2(fd_err, 2) < 0) fail_errno("dup2", NULL);
    if (fd_in > 2) close(fd_in);
    if (fd_out > 2) close(fd_out);
    if (fd_err > 2 && fd_err != fd_out) close(fd_err);

    if (refusals[0] != '\0') dprintf(2, "%s", refusals);
    const char *node = getenv("SLURMD_NODENAME");
    char who[300];
    snprintf(who, sizeof who, "slurmstepd%s%s", node != NULL ? "-" : "", node != NULL ? node : "");
    const char *cwd = argv[11];
    if (chdir(cwd) != 0) {
        dprintf(2, "%s: error: couldn't chdir to `%s': %s: going to /tmp instead\n", who, cwd,
                strerror(errno));
        if (chdir("/tmp") != 0) fail_errno("chdir /tmp", NULL);
    }
    char pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    if (setenv("SLURM_TASK_PID", pid, 1) != 0) fail_errno("setenv", NULL);
    default_internal_signals();
    execv(argv[12], argv + 12);
    int saved = errno;
    char interp[400];
    interpreter(argv[12], interp, sizeof interp);
    if (interp[0] != '\0' && (saved == ENOENT || saved == EACCES))
        dprintf(2, "%s: error: execve(): bad interpreter(%s): %s\n", who, interp, strerror(saved));
    else
        dprintf(2, "%s: error: execve(): %s: %s\n", who, argv[12], strerror(saved));
    _exit(saved);
}
