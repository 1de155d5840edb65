/* svg.c — `vcattach convert --format svg`: a flame graph as one self-contained SVG file.
 *
 * Why our own: the trace must be readable offline, on the machine where it was taken, with
 * nothing but a browser; a multi-hundred-MB JSON for a web viewer is not that.  The file holds
 * the aggregated call tree (every distinct stack once, with its inclusive time), a small
 * stylesheet and a small script: hover shows a frame's time, a click zooms into it, "Search"
 * highlights the frames whose name matches (and says how much time they cover), "Reset zoom"
 * goes back.  No external resource is referenced.
 *
 * The tree comes from the nesting walk (model.h), per thread under a frame naming the thread,
 * or with every thread merged (export_svg's `merged`).  Frames narrower than 1/FRAME_MIN_DIV
 * of the whole are left out (they could not be seen or clicked), which also bounds the file:
 * at most a few thousand frames, whatever the trace's size.  Blocking calls (waits.def) are
 * drawn in blue, the rest in warm colours, so waiting stands out from work.  Weighed by work
 * (`--working`), a frame's width is its working time instead of its wall time (self_cpu.h:
 * on-CPU, as `summary` counts it): what waited shrinks to what it ran, and the slow
 * computation is the wide frame.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "self_cpu.h"
#include "svg.h"
#include "waits.h"

#define FRAME_MIN_DIV 2000 /* frames below 1/2000 of the total are dropped */
#define WIDTH 1200
#define ROW 17
#define PAD_TOP 40
#define PAD_BOTTOM 30

typedef struct node {
    uint32_t func;   /* function id, or UINT32_MAX for a root/thread frame */
    uint32_t parent; /* node index; UINT32_MAX for the root */
    uint32_t child, sibling; /* first child, next sibling; UINT32_MAX = none */
    uint32_t thread; /* thread index for a thread frame */
    uint32_t depth;
    int64_t total, self; /* ticks */
} node;

typedef struct tree {
    const vct_trace *t;
    node *v;
    size_t n, cap;
    uint64_t *slots; /* hash (parent, func) -> node index + 1; 0 = empty */
    size_t nslots;
    uint32_t *path; /* node of each open call, by depth */
    size_t path_cap;
    uint32_t base; /* the node the current thread's roots hang from */
    int working;   /* widths are on-CPU time, not wall time */
    vct_self_cpu cpu;
    int failed;
} tree;

#define NONE UINT32_MAX

static uint64_t slot_hash(uint32_t parent, uint32_t func)
{
    uint64_t k = ((uint64_t)parent << 32) | func;
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

static int grow_slots(tree *tr)
{
    size_t n = tr->nslots ? tr->nslots * 2 : 1024;
    uint64_t *slots = calloc(n, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < tr->n; i++) {
        if (tr->v[i].parent == NONE || tr->v[i].func == NONE)
            continue;
        size_t h = slot_hash(tr->v[i].parent, tr->v[i].func) & (n - 1);
        while (slots[h])
            h = (h + 1) & (n - 1);
        slots[h] = i + 1;
    }
    free(tr->slots);
    tr->slots = slots;
    tr->nslots = n;
    return 0;
}

static uint32_t new_node(tree *tr, uint32_t parent, uint32_t func, uint32_t thread)
{
    if (tr->n == tr->cap) {
        size_t cap = tr->cap ? tr->cap * 2 : 1024;
        node *v = realloc(tr->v, cap * sizeof *v);
        if (!v)
            return NONE;
        tr->v = v;
        tr->cap = cap;
    }
    uint32_t id = (uint32_t)tr->n++;
    node *nd = &tr->v[id];
    *nd = (node){func, parent, NONE, NONE, thread, 0, 0, 0};
    if (parent != NONE) {
        nd->depth = tr->v[parent].depth + 1;
        nd->sibling = tr->v[parent].child;
        tr->v[parent].child = id;
    }
    return id;
}

/* The child of `parent` for `func`, created if new. */
static uint32_t child_of(tree *tr, uint32_t parent, uint32_t func)
{
    if ((tr->n + 1) * 2 > tr->nslots && grow_slots(tr) < 0)
        return NONE;
    size_t mask = tr->nslots - 1, h = slot_hash(parent, func) & mask;
    for (; tr->slots[h]; h = (h + 1) & mask) {
        node *nd = &tr->v[tr->slots[h] - 1];
        if (nd->parent == parent && nd->func == func)
            return (uint32_t)(tr->slots[h] - 1);
    }
    uint32_t id = new_node(tr, parent, func, 0);
    if (id != NONE)
        tr->slots[h] = (uint64_t)id + 1;
    return id;
}

static void on_open(void *ctx, const vct_event *ev, int64_t start, int64_t end, size_t depth)
{
    tree *tr = ctx;
    if (tr->failed)
        return;
    if (depth >= tr->path_cap) {
        size_t cap = tr->path_cap ? tr->path_cap * 2 : 64;
        uint32_t *p = realloc(tr->path, cap * sizeof *p);
        if (!p) {
            tr->failed = 1;
            return;
        }
        tr->path = p;
        tr->path_cap = cap;
    }
    uint32_t parent = depth ? tr->path[depth - 1] : tr->base;
    uint32_t id = child_of(tr, parent, ev->func);
    if (id == NONE) {
        tr->failed = 1;
        return;
    }
    tr->path[depth] = id;
    if (tr->working) { /* totals are summed up from the selves after the walk */
        if (vct_self_cpu_open(&tr->cpu, depth, start, end) < 0)
            tr->failed = 1;
        return;
    }
    int64_t dur = vct_sat_diff(end, start); /* saturating: timestamps may span all of int64 */
    tr->v[id].total = vct_sat_add(tr->v[id].total, dur);
    if (!depth) /* the thread (and root) frames hold the sum of their root calls */
        for (uint32_t p = parent; p != NONE; p = tr->v[p].parent)
            tr->v[p].total = vct_sat_add(tr->v[p].total, dur);
}

static void on_close(void *ctx, const vct_event *ev, int64_t start, int64_t end, int64_t self,
                     size_t depth)
{
    tree *tr = ctx;
    if (tr->working && (self = vct_self_cpu_close(&tr->cpu, depth, ev->func, self)) < 0)
        tr->failed = 1;
    if (tr->failed)
        return;
    node *nd = &tr->v[tr->path[depth]];
    nd->self = vct_sat_add(nd->self, self);
    if (tr->working)
        nd->total = vct_sat_add(nd->total, self);
}

/* ---- writing -------------------------------------------------------------------------------- */

/* Text for XML: markup characters escaped, control characters dropped. */
static void put_xml(FILE *out, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '&')
            fputs("&amp;", out);
        else if (ch == '<')
            fputs("&lt;", out);
        else if (ch == '>')
            fputs("&gt;", out);
        else if (ch == '"')
            fputs("&quot;", out);
        else if (ch >= 0x20 && ch != 0x7f)
            fputc(ch, out);
    }
}

static int cmp_children(const void *a, const void *b, void *ctx)
{
    const tree *tr = ctx;
    const node *x = &tr->v[*(const uint32_t *)a], *y = &tr->v[*(const uint32_t *)b];
    if (x->func == NONE || y->func == NONE) /* thread frames: in trace order */
        return x->thread < y->thread ? -1 : x->thread > y->thread;
    return strcmp(tr->t->funcs[x->func], tr->t->funcs[y->func]);
}

/* A warm colour from the name (stable across files), or a blue one for a wait. */
static void colour(const char *name, int wait, char *buf, size_t len)
{
    uint32_t h = 2166136261u;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    if (wait)
        snprintf(buf, len, "rgb(%u,%u,%u)", 90 + h % 40, 140 + (h >> 8) % 50, 220 + (h >> 16) % 30);
    else
        snprintf(buf, len, "rgb(%u,%u,%u)", 205 + h % 50, 80 + (h >> 8) % 120, 40 + (h >> 16) % 40);
}

typedef struct writer {
    tree *tr;
    FILE *out;
    int64_t whole;     /* the root's time: frames are laid out as fractions of it */
    int64_t min_ticks; /* frames below this are left out */
} writer;

static void frame_label(const writer *w, const node *nd, char *buf, size_t len)
{
    if (nd->parent == NONE)
        snprintf(buf, len, "all");
    else if (nd->func == NONE)
        vct_thread_label(&w->tr->t->threads[nd->thread], buf, len);
    else
        snprintf(buf, len, "%s", w->tr->t->funcs[nd->func]);
}

/* Writes node id (at x ticks from the left) and its children, depth first. */
static int write_node(writer *w, uint32_t id, int64_t x)
{
    const node *nd = &w->tr->v[id];
    if (nd->total < w->min_ticks && nd->parent != NONE)
        return 0;
    char label[1024], fill[32];
    frame_label(w, nd, label, sizeof label);
    int wait = nd->func != NONE && vct_wait_kind_of(label) != VCT_WAIT_NONE;
    colour(label, wait, fill, sizeof fill);
    if (nd->func == NONE)
        snprintf(fill, sizeof fill, "rgb(200,200,200)");
    double fx = w->whole ? (double)x / (double)w->whole : 0;
    double fw = w->whole ? (double)nd->total / (double)w->whole : 1;
    fprintf(w->out, "<g class=\"f%s\" data-x=\"%.9f\" data-w=\"%.9f\" data-d=\"%u\" "
                    "data-ms=\"%.3f\" data-self=\"%.3f\"><title>",
            wait ? " wait" : "", fx, fw, nd->depth, (double)nd->total / 1e5,
            (double)nd->self / 1e5);
    put_xml(w->out, label);
    fprintf(w->out, "</title><rect fill=\"%s\"/><text></text></g>\n", fill);
    /* children, by name */
    size_t n = 0;
    for (uint32_t c = nd->child; c != NONE; c = w->tr->v[c].sibling)
        n++;
    if (!n)
        return 0;
    uint32_t *kids = malloc(n * sizeof *kids);
    if (!kids)
        return -1;
    n = 0;
    for (uint32_t c = nd->child; c != NONE; c = w->tr->v[c].sibling)
        kids[n++] = c;
    qsort_r(kids, n, sizeof *kids, cmp_children, w->tr);
    int64_t cx = x;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = write_node(w, kids[i], cx);
        cx = vct_sat_add(cx, w->tr->v[kids[i]].total);
    }
    free(kids);
    return rc;
}

/* The page's behaviour: layout from the data-* attributes (fractions of the whole), so that
 * zooming is a relayout, not a transform that would stretch the text. */
static const char script[] =
    "var W=" "1200" ",ROW=17,TOP=40,frames=[],zoomed=null,term=null;\n"
    "function init(){\n"
    "  var gs=document.querySelectorAll('g.f');\n"
    "  for(var i=0;i<gs.length;i++){var g=gs[i];frames.push({g:g,x:+g.getAttribute('data-x'),"
    "w:+g.getAttribute('data-w'),d:+g.getAttribute('data-d'),ms:+g.getAttribute('data-ms'),"
    "name:g.querySelector('title').textContent,rect:g.querySelector('rect'),"
    "text:g.querySelector('text')});"
    "g.addEventListener('click',zoomTo.bind(null,frames[frames.length-1]));"
    "g.addEventListener('mouseover',details.bind(null,frames[frames.length-1]));}\n"
    "  document.getElementById('reset').addEventListener('click',function(){zoomTo(null);});\n"
    "  document.getElementById('search').addEventListener('click',function(){"
    "var t=prompt('Search frames (text or /regexp/):',term||'');if(t!==null)search(t);});\n"
    "  document.getElementById('clear').addEventListener('click',function(){search('');});\n"
    "  layout();\n"
    "}\n"
    "function layout(){\n"
    "  var z0=zoomed?zoomed.x:0,zw=zoomed?zoomed.w:1,zd=zoomed?zoomed.d:0;\n"
    "  var H=+document.documentElement.getAttribute('height');\n"
    "  for(var i=0;i<frames.length;i++){var f=frames[i],x,w,show;\n"
    "    if(zoomed&&f.d<zd){show=f.x<=z0+1e-12&&f.x+f.w>=z0+zw-1e-12;x=0;w=W-20;}\n"
    "    else{show=!zoomed||(f.x>=z0-1e-12&&f.x+f.w<=z0+zw+1e-12);x=(f.x-z0)/zw*(W-20);"
    "w=f.w/zw*(W-20);}\n"
    "    if(!show||w<0.1){f.g.style.display='none';continue;}\n"
    "    f.g.style.display='';var y=H-30-(f.d+1)*ROW;\n"
    "    f.rect.setAttribute('x',10+x);f.rect.setAttribute('y',y);"
    "f.rect.setAttribute('width',Math.max(w-0.5,0.1));f.rect.setAttribute('height',ROW-1);\n"
    "    f.text.setAttribute('x',13+x);f.text.setAttribute('y',y+ROW-5);\n"
    "    var fit=Math.floor((w-6)/7);"
    "f.text.textContent=fit<3?'':(f.name.length<=fit?f.name:f.name.slice(0,fit-2)+'..');\n"
    "  }\n"
    "  document.getElementById('reset').style.display=zoomed?'':'none';\n"
    "}\n"
    "function zoomTo(f){zoomed=(f&&f.d>0)?f:null;layout();}\n"
    "function details(f){document.getElementById('details').textContent=f.name+' ('+"
    "f.ms.toFixed(3)+' ms, '+(100*f.w).toFixed(2)+'%)';}\n"
    "function search(t){\n"
    "  term=t||null;var re=null;\n"
    "  if(term&&term.length>2&&term[0]=='/'&&term[term.length-1]=='/'){"
    "try{re=new RegExp(term.slice(1,-1));}catch(e){re=null;}}\n"
    "  var covered=0,count=0,until=-1;\n"
    "  for(var i=0;i<frames.length;i++){var f=frames[i];"
    "var hit=!!term&&f.d>0&&(re?re.test(f.name):f.name.indexOf(term)>=0);\n"
    "    f.g.classList.toggle('match',hit);if(hit){count++;"
    "if(f.x>=until-1e-12){covered+=f.w;until=f.x+f.w;}}}\n"
    "  var m=document.getElementById('matched');\n"
    "  m.textContent=term?('Matched: '+(100*covered).toFixed(1)+'% ('+count+' frames)'):'';\n"
    "  document.getElementById('clear').style.display=term?'':'none';\n"
    "}\n";

static const char style[] =
    "text{font-family:monospace;font-size:12px;fill:#000;pointer-events:none}\n"
    "#title{font-size:16px;text-anchor:middle}\n"
    ".button{cursor:pointer;fill:#1a55b0;pointer-events:all}\n"
    "g.f{cursor:pointer}\n"
    "g.f:hover rect{stroke:#000;stroke-width:0.5}\n"
    "g.match rect{fill:rgb(230,0,230)!important}\n";

int export_svg(const vct_trace *t, int merged, int working, const char *title, FILE *out,
               char *err, size_t errlen)
{
    tree tr = {.t = t, .working = working, .cpu = {.t = t}};
    int rc = -1;
    uint32_t root = new_node(&tr, NONE, NONE, 0);
    if (root == NONE)
        goto nomem;
    for (size_t i = 0; i < t->nthreads; i++) {
        const vct_thread *th = &t->threads[i];
        if (!th->nevents)
            continue;
        tr.base = root;
        if (!merged) {
            tr.base = new_node(&tr, root, NONE, (uint32_t)i);
            if (tr.base == NONE)
                goto nomem;
        }
        tr.cpu.th = th;
        if (vct_thread_walk(th, &(vct_walk_ops){on_open, on_close}, &tr) < 0 || tr.failed)
            goto nomem;
    }
    if (working) /* a child's index is above its parent's: one pass from the end sums up */
        for (size_t n = tr.n; n-- > 1;)
            tr.v[tr.v[n].parent].total = vct_sat_add(tr.v[tr.v[n].parent].total, tr.v[n].total);
    writer w = {&tr, out, tr.v[root].total, tr.v[root].total / FRAME_MIN_DIV};
    /* The height goes in the header, before the frames: the depth of the deepest frame that
     * will be drawn. */
    uint32_t max_depth = 0;
    for (size_t i = 0; i < tr.n; i++)
        if (tr.v[i].total >= w.min_ticks && tr.v[i].depth > max_depth)
            max_depth = tr.v[i].depth;
    unsigned height = PAD_TOP + PAD_BOTTOM + (max_depth + 1) * ROW;
    fprintf(out,
            "<?xml version=\"1.0\" standalone=\"no\"?>\n"
            "<svg version=\"1.1\" width=\"%d\" height=\"%u\" viewBox=\"0 0 %d %u\" "
            "xmlns=\"http://www.w3.org/2000/svg\" onload=\"init()\">\n"
            "<style type=\"text/css\"><![CDATA[\n%s]]></style>\n"
            "<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n"
            "<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"#f7f7f2\"/>\n"
            "<text id=\"title\" x=\"%d\" y=\"24\">",
            WIDTH, height, WIDTH, height, style, script, WIDTH / 2);
    put_xml(out, title ? title : "vcattach flame graph");
    fprintf(out, "</text>\n"
                 "<text id=\"reset\" class=\"button\" x=\"10\" y=\"24\" style=\"display:none\">"
                 "Reset zoom</text>\n"
                 "<text id=\"search\" class=\"button\" x=\"%d\" y=\"24\">Search</text>\n"
                 "<text id=\"clear\" class=\"button\" x=\"%d\" y=\"24\" style=\"display:none\">"
                 "Clear</text>\n"
                 "<text id=\"details\" x=\"10\" y=\"%u\"> </text>\n"
                 "<text id=\"matched\" x=\"%d\" y=\"%u\" style=\"text-anchor:end\"> </text>\n"
                 "<g id=\"frames\">\n",
            WIDTH - 130, WIDTH - 60, height - 10, WIDTH - 10, height - 10);
    if (write_node(&w, root, 0) < 0)
        goto nomem;
    fputs("</g>\n</svg>\n", out);
    rc = ferror(out) ? -1 : 0;
    if (rc < 0)
        snprintf(err, errlen, "writing the SVG failed");
    goto out;
nomem:
    snprintf(err, errlen, "out of memory while building the flame graph");
out:
    free(tr.v);
    free(tr.slots);
    free(tr.path);
    vct_self_cpu_free(&tr.cpu);
    return rc;
}
