/* shoal-stepd-exec: the last step of starting a batch script, run by its supervisor (noded.stepd).
 *
 * Forking the supervisor (a 17 MB Python) for each job costs more CPU than the rest of the launch
 * (page tables copied, copy-on-write faults, the copy torn down at exec). So the supervisor spawns
 * this small program instead (vfork + exec: nothing of its memory is copied), writes its pid into
 * the job's cgroups and spool, and then lets it go. Here, still root: wait for the go, become the
 * job's user (groups, gid, uid), set the umask, open the job's streams as that user, enter the
 * working directory (or /tmp, saying so on the job's stderr), add SLURM_TASK_PID to the environment
 * and exec the script, which thus starts in its cgroups with its pid on record.
 *
 * A failure before the script runs is told on ERR_FD, which is close-on-exec (the supervisor reads
 * end-of-file once the script runs), and ends this program with status 1; the supervisor records it.
 *
 * argv: GO_FD ERR_FD UID GID GROUPS UMASK OPEN_MODE STDIN STDOUT STDERR CWD SCRIPT [ARG...]
 *   GROUPS: the supplementary gids, comma-separated (set only when running as root)
 *   UMASK: octal; OPEN_MODE: "append" or "truncate"
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_GROUPS 65536
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

    const char *cwd = argv[11];
    if (chdir(cwd) != 0) {
        dprintf(2, "slurmstepd: error: couldn't chdir to `%s': %s: going to /tmp instead\n", cwd,
                strerror(errno));
        if (chdir("/tmp") != 0) fail_errno("chdir /tmp", NULL);
    }
    char pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    if (setenv("SLURM_TASK_PID", pid, 1) != 0) fail_errno("setenv", NULL);
    default_internal_signals();
    execv(argv[12], argv + 12);
    fail_errno("execve(): ", argv[12]);
    return 1;
}
