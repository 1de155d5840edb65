/* tree_listeners.c — the listening control sockets of a tree trace (tree_run.h): an agent
 * connects to an abstract name, which exists only in the network namespace its socket was
 * made in (control_client.c), so a tree whose processes live in several (the containers of a
 * pod, a process that entered a new one) gets one listener per namespace, made when its first
 * member there is injected, at most MAX_NETNS. */
#include "tree_run.h"

#include <stdio.h>
#include <sys/socket.h>

#include "vcinject.h"
#include "say.h"

int tree_listener_for(struct tree_run *r, pid_t pid, char *err, size_t errlen)
{
    dev_t dev;
    ino_t ino;
    if (target_ns_id(pid, "net", &dev, &ino) < 0) {
        snprintf(err, errlen, "cannot read its network namespace (gone?)");
        return -1;
    }
    for (size_t i = 0; i < r->nlis; i++)
        if (r->lis[i].dev == dev && r->lis[i].ino == ino)
            return (int)i;
    if (r->nlis == MAX_NETNS) {
        snprintf(err, errlen, "the tree spans more than %d network namespaces: trace this "
                              "process on its own", MAX_NETNS);
        return -1;
    }
    struct listener *l = &r->lis[r->nlis];
    ctl_init(&l->ctl);
    if (ctl_listen(&l->ctl, pid, err, errlen) < 0)
        return -1;
    /* Many agents connect at once (a tree attached in one go): a deeper backlog than the
     * single-target socket's, or later connects would time out in the agents. */
    listen(l->ctl.listen_fd, 256);
    l->dev = dev;
    l->ino = ino;
    if (r->opt->verbose && r->nlis > 0)
        say("vcattach: pid %d is in another network namespace: a control socket "
                        "made there for it\n", (int)pid);
    return (int)r->nlis++;
}

void tree_listeners_close(struct tree_run *r)
{
    for (size_t i = 0; i < r->nlis; i++)
        ctl_close(&r->lis[i].ctl);
    r->nlis = 0;
}
