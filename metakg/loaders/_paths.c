/*
 * k shortest simple paths on CSR adjacency arrays, for the embedded GraphStore.
 *
 * Loaded with ctypes (no Python C-API): the store passes pointers to its immutable int64 arrays. The
 * algorithm is the one of EmbeddedStore._shortest_paths_numpy, in the same order, so both give the same
 * paths: BFS from the root t over the backward arrays, level by level, then for each length L = 1..max_hops
 * a depth-first enumeration from s over the forward arrays that only steps to nodes whose distance to t
 * still fits in the remaining hops.
 */
#include <stdint.h>

typedef struct {
    const int64_t *ptr; /* n_nodes + 1 offsets */
    const int64_t *nbr; /* neighbour node of each entry */
    const int64_t *eid; /* edge index of each entry */
    const int64_t *rel; /* relation code of each entry */
} csr_t;

#define MAX_HOPS 16

/* One more BFS level from the root; returns the new end of the queue. */
static int64_t bfs_level(const csr_t *g, const uint8_t *rel_ok, int8_t *dist, int64_t *queue, int64_t level_start,
                         int64_t level_end, int8_t level) {
    int64_t tail = level_end;
    for (int64_t q = level_start; q < level_end; q++) {
        int64_t u = queue[q];
        for (int64_t p = g->ptr[u]; p < g->ptr[u + 1]; p++) {
            int64_t v = g->nbr[p];
            if (dist[v] >= 0 || (rel_ok && !rel_ok[g->rel[p]])) continue;
            dist[v] = level;
            queue[tail++] = v;
        }
    }
    return tail;
}

/*
 * Returns the number of paths written (at most k). Path i has out_len[i] edges: its edge indices are
 * out_edges[i*max_hops ...] and the nodes after s are out_nodes[i*max_hops ...].
 * dist (n_nodes int8) must be all -1 on entry and is all -1 again on return; queue needs n_nodes slots.
 */
int64_t k_shortest_paths(const int64_t *f_ptr, const int64_t *f_nbr, const int64_t *f_eid, const int64_t *f_rel,
                         const int64_t *b_ptr, const int64_t *b_nbr, const int64_t *b_rel,
                         const uint8_t *rel_ok, int64_t s, int64_t t, int64_t max_hops, int64_t k, int8_t *dist,
                         int64_t *queue, int64_t *out_edges, int64_t *out_nodes, int64_t *out_len) {
    if (max_hops > MAX_HOPS) max_hops = MAX_HOPS;
    csr_t fw = {f_ptr, f_nbr, f_eid, f_rel};
    csr_t bw = {b_ptr, b_nbr, 0, b_rel};
    int64_t found = 0;
    int64_t level_start = 0, level_end = 1, depth = 0;
    dist[t] = 0;
    queue[0] = t;

    int64_t path_nodes[MAX_HOPS + 1];
    int64_t path_edges[MAX_HOPS];
    int64_t cursor[MAX_HOPS + 1];

    for (int64_t length = 1; length <= max_hops && found < k; length++) {
        /* distances to t are needed up to length-1 hops */
        while (depth < length - 1 && level_start < level_end) {
            int64_t tail = bfs_level(&bw, rel_ok, dist, queue, level_start, level_end, (int8_t)(depth + 1));
            level_start = level_end;
            level_end = tail;
            depth++;
        }
        /* iterative DFS: path_nodes[0..d] is the current prefix, cursor[d] the next entry to try */
        int64_t d = 0;
        path_nodes[0] = s;
        cursor[0] = fw.ptr[s];
        while (d >= 0 && found < k) {
            int64_t u = path_nodes[d];
            int64_t remaining = length - d;
            int advanced = 0;
            while (cursor[d] < fw.ptr[u + 1]) {
                int64_t p = cursor[d]++;
                int64_t v = fw.nbr[p];
                int8_t dv = dist[v];
                if (dv < 0 || dv > remaining - 1) continue;
                if (rel_ok && !rel_ok[fw.rel[p]]) continue;
                if ((remaining == 1) != (v == t)) continue;
                int on_path = 0;
                for (int64_t i = 0; i <= d; i++) {
                    if (path_nodes[i] == v) { on_path = 1; break; }
                }
                if (on_path) continue;
                path_edges[d] = fw.eid[p];
                if (remaining == 1) {
                    for (int64_t i = 0; i < length; i++) {
                        out_edges[found * max_hops + i] = i < d ? path_edges[i] : fw.eid[p];
                        out_nodes[found * max_hops + i] = i < d ? path_nodes[i + 1] : v;
                    }
                    out_len[found] = length;
                    found++;
                    if (found >= k) break;
                    continue;
                }
                path_nodes[d + 1] = v;
                cursor[d + 1] = fw.ptr[v];
                d++;
                advanced = 1;
                break;
            }
            if (!advanced) d--;
        }
    }
    for (int64_t q = 0; q < level_end; q++) dist[queue[q]] = -1; /* leave the scratch clean */
    return found;
}

/* How many adjacency entries a BFS from u reads to reach two hops (chooses the cheaper BFS root). */
int64_t two_hop_cost(const int64_t *ptr, const int64_t *nbr, int64_t u) {
    int64_t cost = 0;
    for (int64_t p = ptr[u]; p < ptr[u + 1]; p++) cost += ptr[nbr[p] + 1] - ptr[nbr[p]];
    return cost;
}
