/* proclib.h - helpers for the multi-process tests (test_boot, test_fabric):
   start a copy of this test program as one process of a job, with its own
   environment and its output in files; wait for it with a deadline; run a
   whole job through tools/spmdrun; a free TCP port; reading a file. */
#ifndef SPMD_TEST_PROCLIB_H
#define SPMD_TEST_PROCLIB_H
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <dirent.h>

static const char *p_self;      /* argv[0] */
static char p_logdir[256] = "build/test-logs";

static double p_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int p_free_port(void) {
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &l) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

/* Start `self --child mode` with env entries "NAME=value" (NULL-terminated;
   "NAME=" unsets), stdout and stderr to <logdir>/<tag>.out/.err. */
/* fork with the child's stdout and stderr going to <logdir>/<tag>.out/.err:
   returns the pid in the parent (or -1), 0 in the child. */
static pid_t p_fork_logged(const char *tag) {
    char out[400], err[400];
    pid_t pid;
    snprintf(out, sizeof out, "%s/%s.out", p_logdir, tag);
    snprintf(err, sizeof err, "%s/%s.err", p_logdir, tag);
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo >= 0) dup2(fo, 1);
        if (fe >= 0) dup2(fe, 2);
    }
    return pid;
}

static pid_t p_spawn(const char *tag, const char *mode, const char *const *env) {
    pid_t pid = p_fork_logged(tag);
    if (pid != 0) return pid;
    {
        int i;
        for (i = 0; env && env[i]; i++) {
            char name[128];
            const char *eq = strchr(env[i], '=');
            size_t n = eq ? (size_t)(eq - env[i]) : strlen(env[i]);
            if (n >= sizeof name) continue;
            memcpy(name, env[i], n);
            name[n] = 0;
            if (eq && eq[1]) setenv(name, eq + 1, 1);
            else unsetenv(name);
        }
        execl(p_self, p_self, "--child", mode, (char *)NULL);
        _exit(126);
    }
}

/* Wait up to `secs`; kill it if still running. Returns the wait status, or -1. */
/* What the process pid, ended and waited for, left in /dev/shm: libfabric's
   shm provider names its region <pid>:<n>:<n> and unlinks it only when the
   endpoint is closed (a kill, or the fault plan's _exit, leaves it: 16 MiB
   of RAM each). Only names of exactly that form, regular files. */
static void p_clean_shm(pid_t pid) {
    char pre[32], path[300];
    DIR *dir = opendir("/dev/shm");
    struct dirent *e;
    size_t n = (size_t)snprintf(pre, sizeof pre, "%d:", (int)pid);
    while (dir && (e = readdir(dir)) != NULL) {
        const char *q = e->d_name + n;
        struct stat sb;
        if (strncmp(e->d_name, pre, n) != 0 || !*q || strspn(q, "0123456789:") != strlen(q)) continue;
        snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
        if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode)) unlink(path);
    }
    if (dir) closedir(dir);
}

static int p_wait(pid_t pid, double secs) {
    double end = p_now() + secs;
    int st = 0;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            p_clean_shm(pid);
            return st;
        }
        if (r < 0) return -1;
        if (p_now() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            p_clean_shm(pid);
            return -1;
        }
        usleep(10000);
    }
}

static int p_exit_code(int st) { return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

/* The whole text of <logdir>/<tag>.<ext> (static buffer, truncated at 64 KiB). */
static const char *p_read(const char *tag, const char *ext) {
    static char buf[65536];
    char path[400];
    FILE *f;
    size_t n = 0;
    snprintf(path, sizeof path, "%s/%s.%s", p_logdir, tag, ext);
    buf[0] = 0;
    f = fopen(path, "r");
    if (!f) return buf;
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* tools/spmdrun -n N [extra] -- self --child mode, output to <tag>.log;
   returns spmdrun's exit status (-1 if it could not run). */
static int p_spmdrun(const char *tag, int n, const char *extra, const char *mode, const char *envs) {
    char cmd[1200];
    const char *run = getenv("SPMDRUN") ? getenv("SPMDRUN") : "tools/spmdrun";
    int st;
    snprintf(cmd, sizeof cmd, "%s %s -n %d --timeout 60 %s -- %s --child %s >%s/%s.log 2>&1", envs ? envs : "", run, n,
             extra ? extra : "", p_self, mode, p_logdir, tag);
    fflush(stdout);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    st = system(cmd);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("  %s: %.1f s\n", tag, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void p_show(const char *tag, const char *ext) {
    const char *t = p_read(tag, ext);
    if (*t) fprintf(stderr, "---- %s.%s:\n%.3000s\n", tag, ext, t);
}
#endif
