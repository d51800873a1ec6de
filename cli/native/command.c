/*
 * shoal's short commands (sbatch, squeue, sinfo, ...) as one small native launcher.
 *
 * Why: a Python command pays 60-100 ms of interpreter start-up before it does any work, ten
 * times what Slurm's C commands take. This launcher instead hands its argv, environment,
 * working directory, umask and stdin/stdout/stderr (SCM_RIGHTS) to the local agent's command
 * runner (cli/runner.py), a warm Python process that forks, becomes the caller (SO_PEERCRED)
 * and runs the same cli.<command>.main. Signals are forwarded to that child; its exit status
 * becomes ours.
 *
 * Whenever the runner cannot be reached (no agent on this host, an older agent, a runner that
 * declines), the launcher execs the plain Python command instead (`shoal-command NAME ARGS`),
 * so behaviour never depends on the runner being there, only speed does.
 *
 * The wire format is in cli/runner.py (REQUEST_MAGIC and friends).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

extern char **environ;

#define MAGIC "SHR1"
#define DEFAULT_SOCKET "/run/shoal/agent.sock"
#define DEFAULT_CONF "/etc/slurm/slurm.conf"
#define RUNNER_SUFFIX ".run"
#define FALLBACK "shoal-command"

static const char *const COMMANDS[] = {
    "sbatch", "squeue", "sinfo", "scontrol", "scancel", "sacct", "sacctmgr", "sprio", "sshare", "sreport", "sdiag", "sstat", NULL,
};

static volatile sig_atomic_t child_pid = 0;
static volatile sig_atomic_t early_signal = 0; /* arrived before the runner named its child */

/* ---- the Python fallback ------------------------------------------------------------------- */

static void exec_python(const char *name, int argc, char **argv) {
    char **args = calloc((size_t)argc + 2, sizeof(char *));
    if (args == NULL) {
        fprintf(stderr, "%s: error: out of memory\n", name);
        exit(1);
    }
    args[0] = (char *)FALLBACK;
    args[1] = (char *)name;
    for (int i = 1; i < argc; i++)
        args[i + 1] = argv[i];

    /* shoal-command is installed next to this launcher (same bin directory) ... */
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash != NULL && (size_t)(slash - self) + sizeof("/" FALLBACK) < sizeof(self)) {
            strcpy(slash + 1, FALLBACK);
            execv(self, args);
        }
    }
    /* ... or somewhere on PATH. */
    execvp(FALLBACK, args);
    fprintf(stderr, "%s: error: cannot run %s: %s\n", name, FALLBACK, strerror(errno));
    exit(1);
}

/* ---- finding the agent's socket (as shoal.agent.client.socket_path does) -------------------- */

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t')
        s++;
    char *end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
        *--end = '\0';
    return s;
}

static int scan_agent_socket(const char *conf, char *out, size_t size) {
    FILE *fh = fopen(conf, "r");
    if (fh == NULL)
        return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof(line), fh) != NULL) {
        char *hash = strchr(line, '#');
        if (hash != NULL)
            *hash = '\0';
        char *eq = strchr(line, '=');
        if (eq == NULL)
            continue;
        *eq = '\0';
        if (strcasecmp(trim(line), "agentsocket") != 0)
            continue;
        char *value = trim(eq + 1);
        size_t len = strlen(value);
        if (len >= 2 && (value[0] == '"' || value[0] == '\'') && value[len - 1] == value[0]) {
            value[len - 1] = '\0';
            value++;
        }
        if (*value != '\0' && strlen(value) < size) {
            strcpy(out, value);
            found = 1;
        }
    }
    fclose(fh);
    return found;
}

static void agent_socket(char *out, size_t size) {
    const char *env = getenv("SHOAL_AGENT_SOCKET");
    if (env != NULL && *env != '\0' && strlen(env) < size) {
        strcpy(out, env);
        return;
    }
    const char *conf = getenv("SLURM_CONF");
    if (conf == NULL || *conf == '\0')
        conf = DEFAULT_CONF;
    if (!scan_agent_socket(conf, out, size))
        snprintf(out, size, "%s", DEFAULT_SOCKET);
}

/* ---- the request ---------------------------------------------------------------------------- */

struct buf {
    char *data;
    size_t len, cap;
};

static int buf_put(struct buf *b, const void *data, size_t len) {
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + len)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (grown == NULL)
            return -1;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
    return 0;
}

static int buf_u32(struct buf *b, uint32_t v) {
    unsigned char le[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >> 24) & 0xff};
    return buf_put(b, le, 4);
}

static int buf_str(struct buf *b, const char *s) {
    size_t len = strlen(s);
    if (len > UINT32_MAX)
        return -1;
    return buf_u32(b, (uint32_t)len) || buf_put(b, s, len);
}

/* The caller's resource limits, which the runner's child takes on (it is forked from the runner and
 * has the runner's): "SHOAL_CALLER_RLIMITS=NAME=SOFT:HARD,..." (shoal.rlimits.decode_caller). */
#define CALLER_RLIMITS "SHOAL_CALLER_RLIMITS="
static void caller_limits(char *out, size_t size) {
    static const struct { const char *name; int resource; } limits[] = {
        {"CPU", RLIMIT_CPU},   {"FSIZE", RLIMIT_FSIZE},   {"DATA", RLIMIT_DATA},     {"STACK", RLIMIT_STACK},
        {"CORE", RLIMIT_CORE}, {"RSS", RLIMIT_RSS},       {"NPROC", RLIMIT_NPROC},   {"NOFILE", RLIMIT_NOFILE},
        {"MEMLOCK", RLIMIT_MEMLOCK}, {"AS", RLIMIT_AS},
    };
    size_t used = (size_t)snprintf(out, size, "%s", CALLER_RLIMITS);
    for (size_t i = 0; i < sizeof limits / sizeof limits[0] && used < size; i++) {
        struct rlimit limit;
        if (getrlimit(limits[i].resource, &limit) != 0)
            continue;
        used += (size_t)snprintf(out + used, size - used, "%s%s=%llu:%llu", used > strlen(CALLER_RLIMITS) ? "," : "",
                                 limits[i].name, (unsigned long long)limit.rlim_cur,
                                 (unsigned long long)limit.rlim_max);
    }
}

static int build_request(struct buf *b, const char *name, int argc, char **argv) {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) == NULL)
        return -1;
    mode_t mask = umask(0);
    umask(mask);
    char umask_text[16];
    snprintf(umask_text, sizeof(umask_text), "%o", (unsigned)mask);

    char limits[1024];
    caller_limits(limits, sizeof limits);
    size_t envc = 0, sent = 1;
    while (environ[envc] != NULL) {
        if (strncmp(environ[envc], CALLER_RLIMITS, strlen(CALLER_RLIMITS)) != 0)
            sent++;
        envc++;
    }
    if (buf_put(b, MAGIC, 4) || buf_str(b, name) || buf_str(b, cwd) || buf_str(b, umask_text) ||
        buf_u32(b, (uint32_t)(argc - 1)))
        return -1;
    for (int i = 1; i < argc; i++)
        if (buf_str(b, argv[i]))
            return -1;
    if (buf_u32(b, (uint32_t)sent) || buf_str(b, limits))
        return -1;
    for (size_t i = 0; i < envc; i++)
        if (strncmp(environ[i], CALLER_RLIMITS, strlen(CALLER_RLIMITS)) != 0 && buf_str(b, environ[i]))
            return -1;
    return 0;
}

/* Send the request; stdin, stdout and stderr travel with its first byte. */
static int send_request(int sock, const struct buf *b) {
    int fds[3] = {0, 1, 2};
    char control[CMSG_SPACE(sizeof(fds))];
    memset(control, 0, sizeof(control));
    struct iovec iov = {.iov_base = b->data, .iov_len = b->len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof(control)};
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(fds));
    memcpy(CMSG_DATA(cmsg), fds, sizeof(fds));

    ssize_t sent;
    do
        sent = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    if (sent < 0)
        return -1;
    size_t off = (size_t)sent;
    while (off < b->len) {
        ssize_t n = send(sock, b->data + off, b->len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        off += (size_t)n;
    }
    return 0;
}

/* ---- running ------------------------------------------------------------------------------- */

static void forward(int sig) {
    pid_t pid = (pid_t)child_pid;
    if (pid > 0)
        kill(pid, sig);
    else
        early_signal = sig;
}

static void forward_signals(void) {
    static const int SIGNALS[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT, 0};
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int i = 0; SIGNALS[i] != 0; i++)
        sigaction(SIGNALS[i], &sa, NULL);
}

/* Read one reply record: a tag byte and a little-endian u32. 0 on EOF, -1 on error. */
static int read_record(int sock, char *tag, uint32_t *value) {
    unsigned char rec[5];
    size_t got = 0;
    while (got < sizeof(rec)) {
        ssize_t n = recv(sock, rec + got, sizeof(rec) - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            return got == 0 ? 0 : -1;
        got += (size_t)n;
    }
    *tag = (char)rec[0];
    *value = (uint32_t)rec[1] | (uint32_t)rec[2] << 8 | (uint32_t)rec[3] << 16 | (uint32_t)rec[4] << 24;
    return 1;
}

static void exit_like(int status) {
    if (WIFEXITED(status))
        exit(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        signal(sig, SIG_DFL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(sig);
        exit(128 + sig);
    }
    exit(1);
}

static int fds_usable(void) {
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0)
            return 0;
    return 1;
}

int main(int argc, char **argv) {
    const char *slash = strrchr(argv[0], '/');
    const char *name = slash ? slash + 1 : argv[0];
    int known = 0;
    for (int i = 0; COMMANDS[i] != NULL; i++)
        if (strcmp(name, COMMANDS[i]) == 0)
            known = 1;
    if (!known) {
        fprintf(stderr, "shoal: '%s' is not one of shoal's commands\n", name);
        return 1;
    }
    const char *off = getenv("SHOAL_COMMAND_RUNNER");
    if ((off != NULL && strcmp(off, "0") == 0) || !fds_usable())
        exec_python(name, argc, argv);

    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char agent[PATH_MAX];
    agent_socket(agent, sizeof(agent));
    if (strlen(agent) + sizeof(RUNNER_SUFFIX) > sizeof(path))
        exec_python(name, argc, argv);
    snprintf(path, sizeof(path), "%s%s", agent, RUNNER_SUFFIX);

    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        exec_python(name, argc, argv);
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, path, strlen(path) + 1);
    if (connect(sock, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        close(sock);
        exec_python(name, argc, argv);
    }

    struct buf request = {0};
    if (build_request(&request, name, argc, argv) != 0 || send_request(sock, &request) != 0) {
        /* Nothing reached the runner whole: it runs nothing on a partial request. */
        close(sock);
        exec_python(name, argc, argv);
    }
    free(request.data);
    forward_signals();

    char tag;
    uint32_t value;
    for (;;) {
        int r = read_record(sock, &tag, &value);
        if (r <= 0)
            break;
        if (tag == 'F') {
            /* The runner declined before running anything (e.g. it cannot act as this user). */
            close(sock);
            exec_python(name, argc, argv);
        }
        if (tag == 'P') {
            child_pid = (sig_atomic_t)value;
            if (early_signal != 0)
                kill((pid_t)value, early_signal);
        }
        else if (tag == 'X')
            exit_like((int)value);
    }
    fprintf(stderr, "%s: error: lost contact with shoal's command runner\n", name);
    return 1;
}
