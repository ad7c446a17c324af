"""Difficulty 3: prefix sums, graphs and grids (BFS, Dijkstra, topological order), dynamic programming,
number theory, two pointers and stacks. Inputs stay small enough for simple Python solutions."""

from __future__ import annotations

from ._helpers import grid, ints, line, problem, ri, sized_list, word


def _grid_with_ends(rng) -> str:
    r, c = ri(rng, 1, 8), ri(rng, 2, 8)
    cells = grid(rng, r, c, 0.3 if rng.random() < 0.7 else 0.5)
    free = [(i, j) for i in range(r) for j in range(c)]
    a, b = rng.choice(len(free), 2, replace=False)
    (si, sj), (ti, tj) = free[int(a)], free[int(b)]
    cells[si][sj], cells[ti][tj] = "S", "T"
    return f"{r} {c}\n" + "\n".join("".join(row) for row in cells)


def _land_grid(rng) -> str:
    r, c = ri(rng, 1, 10), ri(rng, 1, 10)
    cells = grid(rng, r, c, rng.choice([0.3, 0.5, 0.7]), free=".", block="#")
    return f"{r} {c}\n" + "\n".join("".join(row) for row in cells)


def _path_grid(rng) -> str:
    r, c = ri(rng, 1, 8), ri(rng, 1, 8)
    cells = grid(rng, r, c, 0.2 if rng.random() < 0.7 else 0.4)
    cells[0][0] = cells[r - 1][c - 1] = "."
    return f"{r} {c}\n" + "\n".join("".join(row) for row in cells)


def _graph(rng, directed: bool = False, weighted: bool = False, dag: bool = False) -> str:
    n = ri(rng, 1, 9)
    m = ri(rng, 0, min(15, n * (n - 1) // (1 if directed else 2)))
    order = [int(x) + 1 for x in rng.permutation(n)]
    edges = set()
    for _ in range(4 * m):
        if len(edges) >= m:
            break
        u, v = ri(rng, 1, n), ri(rng, 1, n)
        if u == v:
            continue
        if dag and order.index(u) > order.index(v):
            u, v = v, u
        if not directed:
            u, v = min(u, v), max(u, v)
        edges.add((u, v))
    lines = [f"{n} {len(edges)}"]
    for u, v in sorted(edges, key=lambda e: (rng.random(), e)):
        lines.append(f"{u} {v} {ri(rng, 1, 20)}" if weighted else f"{u} {v}")
    return "\n".join(lines)


def _intervals(rng, half_open: bool = False) -> str:
    n = ri(rng, 1, 12)
    rows = []
    for _ in range(n):
        a = ri(rng, 0, 40)
        rows.append(f"{a} {a + ri(rng, 1 if half_open else 0, 10)}")
    return f"{n}\n" + "\n".join(rows)


def _queries(rng, n_max: int, lo: int, hi: int, query) -> str:
    n = ri(rng, 1, n_max)
    q = ri(rng, 1, 10)
    a = ints(rng, n, lo, hi)
    return f"{n} {q}\n{line(a)}\n" + "\n".join(query(n) for _ in range(q))


def _range_query(rng, n: int) -> str:
    a, b = ri(rng, 1, n), ri(rng, 1, n)
    return f"{min(a, b)} {max(a, b)}"


def _knapsack(rng) -> str:
    n = ri(rng, 1, 12)
    cap = ri(rng, 0, 60)
    return f"{n} {cap}\n" + "\n".join(f"{ri(rng, 1, 25)} {ri(rng, 0, 100)}" for _ in range(n))


def _coins(rng) -> str:
    coins = sorted(set(ints(rng, ri(rng, 1, 5), 1, 30)))
    return f"{len(coins)} {ri(rng, 0, 200)}\n{line(coins)}"


PROBLEMS = [
    problem(
        "range_sums", "Range sums", 3, "train",
        """Answer q queries on a list a of n integers: each query gives l and r and asks for a[l] + ... + a[r]
(positions counted from 1).

Input: the first line holds n and q (1 <= n, q <= 10^4); the second line holds the n integers (between -10^4 and
10^4); then q lines with l and r (1 <= l <= r <= n).
Output: q lines with the sums.""",
        """
n, q = map(int, input().split())
a = list(map(int, input().split()))
prefix = [0] * (n + 1)
for i in range(n):
    prefix[i + 1] = prefix[i] + a[i]
out = []
for _ in range(q):
    l, r = map(int, input().split())
    out.append(prefix[r] - prefix[l - 1])
print("\\n".join(map(str, out)))
""",
        lambda rng: _queries(rng, 30, -10**4, 10**4, lambda n: _range_query(rng, n)),
        [("5 3\n1 2 3 4 5\n1 5\n2 3\n4 4", "15\n5\n4")], edges=["1 1\n-3\n1 1"],
    ),
    problem(
        "grid_path", "Shortest path in a grid", 3, "train",
        """A grid has r rows and c columns. Cells are free (.), walls (#), the start S and the target T. Each move goes
to a free neighbouring cell up, down, left or right (S and T are free). Print the least number of moves from S to T,
or -1 if T cannot be reached.

Input: the first line holds r and c (1 <= r, c <= 50); then r lines of c characters.
Output: the least number of moves, or -1.""",
        """
from collections import deque

r, c = map(int, input().split())
g = [input().strip() for _ in range(r)]
for i in range(r):
    for j in range(c):
        if g[i][j] == "S":
            start = (i, j)
dist = {start: 0}
queue = deque([start])
answer = -1
while queue:
    i, j = queue.popleft()
    if g[i][j] == "T":
        answer = dist[(i, j)]
        break
    for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        ni, nj = i + di, j + dj
        if 0 <= ni < r and 0 <= nj < c and g[ni][nj] != "#" and (ni, nj) not in dist:
            dist[(ni, nj)] = dist[(i, j)] + 1
            queue.append((ni, nj))
print(answer)
""",
        _grid_with_ends,
        [("3 4\nS.#.\n..#T\n....", "6")], edges=["1 2\nST", "1 3\nS#T"],
    ),
    problem(
        "islands", "Counting islands", 3, "train",
        """A map has r rows and c columns of land (#) and water (.). An island is a group of land cells connected
through shared sides (not corners). Count the islands.

Input: the first line holds r and c (1 <= r, c <= 50); then r lines of c characters.
Output: the number of islands.""",
        """
r, c = map(int, input().split())
g = [list(input().strip()) for _ in range(r)]
count = 0
for i in range(r):
    for j in range(c):
        if g[i][j] == "#":
            count += 1
            stack = [(i, j)]
            g[i][j] = "."
            while stack:
                x, y = stack.pop()
                for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
                    if 0 <= nx < r and 0 <= ny < c and g[nx][ny] == "#":
                        g[nx][ny] = "."
                        stack.append((nx, ny))
print(count)
""",
        _land_grid,
        [("3 4\n##..\n#..#\n..##", "2")], edges=["1 1\n.", "2 2\n#.\n.#"],
    ),
    problem(
        "lis", "Longest increasing subsequence", 3, "val",
        """A subsequence keeps some elements of a list in their order. Print the length of the longest strictly
increasing subsequence.

Input: the first line holds n (1 <= n <= 1000); the second line holds n integers between -10^6 and 10^6.
Output: the length of the longest strictly increasing subsequence.""",
        """
n = int(input())
a = list(map(int, input().split()))
best = [1] * n
for i in range(n):
    for j in range(i):
        if a[j] < a[i] and best[j] + 1 > best[i]:
            best[i] = best[j] + 1
print(max(best))
""",
        lambda rng: sized_list(rng, 200, -10 if rng.random() < 0.5 else -10**6, 10 if rng.random() < 0.5 else 10**6),
        [("6\n10 9 2 5 3 7", "3")], edges=["1\n4", "3\n2 2 2"],
    ),
    problem(
        "knapsack", "Knapsack", 3, "test",
        """There are n items; item i has weight w_i and value v_i. Choose items of total weight at most W so that the
total value is as large as possible (each item at most once). Print that value.

Input: the first line holds n and W (1 <= n <= 100, 0 <= W <= 1000); then n lines with w_i and v_i
(1 <= w_i <= 1000, 0 <= v_i <= 10^6).
Output: the largest total value.""",
        """
n, cap = map(int, input().split())
best = [0] * (cap + 1)
for _ in range(n):
    w, v = map(int, input().split())
    for c in range(cap, w - 1, -1):
        if best[c - w] + v > best[c]:
            best[c] = best[c - w] + v
print(best[cap])
""",
        _knapsack,
        [("3 5\n2 3\n3 4\n4 5", "7")], edges=["1 0\n1 5", "2 3\n3 10\n4 20"],
    ),
    problem(
        "min_coins", "Fewest coins", 3, "train",
        """Using coins of the given values (any number of each), pay exactly the amount s with as few coins as
possible. Print that number, or -1 if the amount cannot be paid.

Input: the first line holds n and s (1 <= n <= 20, 0 <= s <= 10^4); the second line holds n distinct coin values
(1 <= value <= 10^4).
Output: the least number of coins, or -1.""",
        """
n, s = map(int, input().split())
coins = list(map(int, input().split()))
INF = float("inf")
best = [0] + [INF] * s
for amount in range(1, s + 1):
    for c in coins:
        if c <= amount and best[amount - c] + 1 < best[amount]:
            best[amount] = best[amount - c] + 1
print(best[s] if best[s] != INF else -1)
""",
        _coins,
        [("3 11\n1 2 5", "3")], edges=["1 0\n7", "1 3\n2"],
    ),
    problem(
        "coin_ways", "Ways to pay", 3, "train",
        """Count the ways to pay exactly the amount s with coins of the given values (any number of each). Two ways
are the same if they use the same number of coins of each value. Print the count modulo 1000000007.

Input: the first line holds n and s (1 <= n <= 20, 0 <= s <= 10^4); the second line holds n distinct coin values
(1 <= value <= 10^4).
Output: the number of ways modulo 1000000007.""",
        """
MOD = 1000000007
n, s = map(int, input().split())
coins = list(map(int, input().split()))
ways = [1] + [0] * s
for c in coins:
    for amount in range(c, s + 1):
        ways[amount] = (ways[amount] + ways[amount - c]) % MOD
print(ways[s])
""",
        _coins,
        [("3 5\n1 2 5", "4")], edges=["1 0\n3", "2 3\n2 4"],
    ),
    problem(
        "edit_distance", "Edit distance", 3, "train",
        """The edit distance of two words is the least number of single-letter insertions, deletions and
substitutions that turn one into the other. Print the edit distance.

Input: two lines, each with a word of 1 to 100 lowercase English letters.
Output: the edit distance.""",
        """
a = input().strip()
b = input().strip()
n, m = len(a), len(b)
prev = list(range(m + 1))
for i in range(1, n + 1):
    cur = [i] + [0] * m
    for j in range(1, m + 1):
        cost = 0 if a[i - 1] == b[j - 1] else 1
        cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    prev = cur
print(prev[m])
""",
        lambda rng: f"{word(rng, 1, 10, 'abc')}\n{word(rng, 1, 10, 'abc')}",
        [("kitten\nsitting", "3")], edges=["a\na", "a\nbcd"],
    ),
    problem(
        "lcs", "Longest common subsequence", 3, "val",
        """Print the length of the longest sequence of letters that is a subsequence of both words (a subsequence
keeps some letters in their order).

Input: two lines, each with a word of 1 to 100 lowercase English letters.
Output: the length of the longest common subsequence.""",
        """
a = input().strip()
b = input().strip()
n, m = len(a), len(b)
dp = [[0] * (m + 1) for _ in range(n + 1)]
for i in range(1, n + 1):
    for j in range(1, m + 1):
        if a[i - 1] == b[j - 1]:
            dp[i][j] = dp[i - 1][j - 1] + 1
        else:
            dp[i][j] = max(dp[i - 1][j], dp[i][j - 1])
print(dp[n][m])
""",
        lambda rng: f"{word(rng, 1, 12, 'abcd')}\n{word(rng, 1, 12, 'abcd')}",
        [("abcde\nace", "3")], edges=["a\nb"],
    ),
    problem(
        "max_subarray", "Best contiguous sum", 3, "test",
        """Print the largest sum of a non-empty block of consecutive elements of a list.

Input: the first line holds n (1 <= n <= 10^4); the second line holds n integers between -10^4 and 10^4.
Output: the largest block sum.""",
        """
n = int(input())
a = list(map(int, input().split()))
best = a[0]
current = 0
for x in a:
    current = max(x, current + x)
    best = max(best, current)
print(best)
""",
        lambda rng: sized_list(rng, 300, -10**4, 10**4 if rng.random() < 0.5 else 100),
        [("8\n-2 1 -3 4 -1 2 1 -5", "6")], edges=["3\n-5 -2 -9", "1\n0"],
    ),
    problem(
        "count_primes", "How many primes", 3, "train",
        """Print how many prime numbers are at most n.

Input: one integer n (1 <= n <= 50000).
Output: the number of primes p with p <= n.""",
        """
n = int(input())
is_prime = [True] * (n + 1)
is_prime[0] = False
if n >= 1:
    is_prime[1] = False
p = 2
while p * p <= n:
    if is_prime[p]:
        for multiple in range(p * p, n + 1, p):
            is_prime[multiple] = False
    p += 1
print(sum(is_prime))
""",
        lambda rng: str(ri(rng, 1, 50000) if rng.random() < 0.4 else ri(rng, 1, 60)),
        [("10", "4")], edges=["1", "2"],
    ),
    problem(
        "mod_pow", "Modular power", 3, "train",
        """Print a^b modulo m.

Input: one line with a, b and m (0 <= a <= 10^9, 0 <= b <= 10^18, 1 <= m <= 10^9).
Output: a^b mod m (a number between 0 and m - 1; note that a^0 = 1).""",
        """
a, b, m = map(int, input().split())
result = 1 % m
base = a % m
while b > 0:
    if b % 2 == 1:
        result = result * base % m
    base = base * base % m
    b //= 2
print(result)
""",
        lambda rng: f"{ri(rng, 0, 10**9)} {ri(rng, 0, 10**18) if rng.random() < 0.5 else ri(rng, 0, 20)} {ri(rng, 1, 10**9) if rng.random() < 0.7 else ri(rng, 1, 10)}",
        [("2 10 1000", "24")], edges=["5 0 1", "0 0 7"],
    ),
    problem(
        "binomial", "Binomial coefficients", 3, "train",
        """Answer q queries: for each pair n, k print the number of ways to choose k items out of n, modulo 1000000007.

Input: the first line holds q (1 <= q <= 1000); then q lines with n and k (0 <= k <= n <= 2000).
Output: q lines with C(n, k) mod 1000000007.""",
        """
MOD = 1000000007
q = int(input())
queries = [tuple(map(int, input().split())) for _ in range(q)]
top = max(n for n, _ in queries)
fact = [1] * (top + 1)
for i in range(1, top + 1):
    fact[i] = fact[i - 1] * i % MOD
out = []
for n, k in queries:
    value = fact[n] * pow(fact[k], MOD - 2, MOD) % MOD * pow(fact[n - k], MOD - 2, MOD) % MOD
    out.append(value)
print("\\n".join(map(str, out)))
""",
        lambda rng: (lambda q: f"{q}\n" + "\n".join((lambda n: f"{n} {ri(rng, 0, n)}")(ri(rng, 0, 2000 if rng.random() < 0.3 else 12)) for _ in range(q)))(ri(rng, 1, 8)),
        [("3\n5 2\n10 0\n6 6", "10\n1\n1")], edges=["1\n0 0"],
    ),
    problem(
        "divisor_count", "Number of divisors", 3, "val",
        """Print how many positive divisors n has.

Input: one integer n (1 <= n <= 10^10).
Output: the number of divisors of n.""",
        """
n = int(input())
count = 0
d = 1
while d * d <= n:
    if n % d == 0:
        count += 1 if d * d == n else 2
    d += 1
print(count)
""",
        lambda rng: str(rng.choice([ri(rng, 1, 10**10), ri(rng, 1, 1000), ri(rng, 1, 10**5) ** 2, 720720, 997 * 991])),
        [("12", "6")], edges=["1", "36"],
    ),
    problem(
        "prime_factors", "Prime factorisation", 3, "test",
        """Print the prime factors of n in non-decreasing order, each repeated as often as it divides n.

Input: one integer n (2 <= n <= 10^10).
Output: the prime factors on one line, separated by spaces.""",
        """
n = int(input())
factors = []
d = 2
while d * d <= n:
    while n % d == 0:
        factors.append(d)
        n //= d
    d += 1
if n > 1:
    factors.append(n)
print(" ".join(map(str, factors)))
""",
        lambda rng: str(rng.choice([ri(rng, 2, 10**10), ri(rng, 2, 500), 2 ** ri(rng, 1, 33), 999983 * ri(rng, 1, 1000), 7 * 7 * 11])),
        [("360", "2 2 2 3 3 5")], edges=["2", "97"],
    ),
    problem(
        "components", "Connected components", 3, "train",
        """An undirected graph has n vertices numbered 1 to n and m edges. Count its connected components.

Input: the first line holds n and m (1 <= n <= 1000, 0 <= m <= 10^4); then m lines with two vertices u v (u != v).
Output: the number of connected components.""",
        """
n, m = map(int, input().split())
parent = list(range(n + 1))


def find(x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


components = n
for _ in range(m):
    u, v = map(int, input().split())
    ru, rv = find(u), find(v)
    if ru != rv:
        parent[ru] = rv
        components -= 1
print(components)
""",
        _graph,
        [("5 3\n1 2\n2 3\n4 5", "2")], edges=["1 0", "3 0"],
    ),
    problem(
        "bfs_distance", "Fewest hops", 3, "train",
        """An undirected graph has n vertices numbered 1 to n and m edges. Print the least number of edges on a path
from vertex 1 to vertex n, or -1 if there is no path.

Input: the first line holds n and m (1 <= n <= 1000, 0 <= m <= 10^4); then m lines with two vertices u v (u != v).
Output: the least number of edges from 1 to n, or -1.""",
        """
from collections import deque

n, m = map(int, input().split())
adj = [[] for _ in range(n + 1)]
for _ in range(m):
    u, v = map(int, input().split())
    adj[u].append(v)
    adj[v].append(u)
dist = [-1] * (n + 1)
dist[1] = 0
queue = deque([1])
while queue:
    u = queue.popleft()
    for v in adj[u]:
        if dist[v] == -1:
            dist[v] = dist[u] + 1
            queue.append(v)
print(dist[n])
""",
        _graph,
        [("4 4\n1 2\n2 3\n3 4\n1 3", "2")], edges=["1 0", "2 0"],
    ),
    problem(
        "dijkstra", "Cheapest route", 3, "train",
        """A directed graph has n vertices numbered 1 to n and m weighted edges. Print the smallest total weight of a
path from vertex 1 to vertex n, or -1 if there is no path.

Input: the first line holds n and m (1 <= n <= 1000, 0 <= m <= 10^4); then m lines with u, v and w: an edge from
u to v of weight w (1 <= w <= 10^4).
Output: the smallest total weight, or -1.""",
        """
import heapq

n, m = map(int, input().split())
adj = [[] for _ in range(n + 1)]
for _ in range(m):
    u, v, w = map(int, input().split())
    adj[u].append((v, w))
INF = 10 ** 18
dist = [INF] * (n + 1)
dist[1] = 0
heap = [(0, 1)]
while heap:
    d, u = heapq.heappop(heap)
    if d > dist[u]:
        continue
    for v, w in adj[u]:
        if d + w < dist[v]:
            dist[v] = d + w
            heapq.heappush(heap, (dist[v], v))
print(dist[n] if dist[n] < INF else -1)
""",
        lambda rng: _graph(rng, directed=True, weighted=True),
        [("3 3\n1 2 4\n2 3 1\n1 3 7", "5")], edges=["1 0", "2 1\n2 1 5"],
    ),
    problem(
        "topo_order", "Task order", 3, "val",
        """There are n tasks numbered 1 to n and m rules "u before v". Print an order of all tasks that obeys every
rule; when several orders do, print the one that is smallest when compared number by number from the left. If
no order obeys the rules, print IMPOSSIBLE.

Input: the first line holds n and m (1 <= n <= 1000, 0 <= m <= 10^4); then m lines with u and v (u != v).
Output: the n task numbers on one line separated by spaces, or IMPOSSIBLE.""",
        """
import heapq

n, m = map(int, input().split())
adj = [[] for _ in range(n + 1)]
indegree = [0] * (n + 1)
for _ in range(m):
    u, v = map(int, input().split())
    adj[u].append(v)
    indegree[v] += 1
heap = [v for v in range(1, n + 1) if indegree[v] == 0]
heapq.heapify(heap)
order = []
while heap:
    u = heapq.heappop(heap)
    order.append(u)
    for v in adj[u]:
        indegree[v] -= 1
        if indegree[v] == 0:
            heapq.heappush(heap, v)
print(" ".join(map(str, order)) if len(order) == n else "IMPOSSIBLE")
""",
        lambda rng: _graph(rng, directed=True, dag=rng.random() < 0.7),
        [("4 3\n2 1\n3 1\n4 3", "2 4 3 1")], edges=["1 0", "2 2\n1 2\n2 1"],
    ),
    problem(
        "merge_intervals", "Merge intervals", 3, "test",
        """Merge n closed intervals [l, r]: intervals that overlap or touch (share an end point) become one. Print the
merged intervals from left to right.

Input: the first line holds n (1 <= n <= 1000); then n lines with l and r (0 <= l <= r <= 10^6).
Output: one line per merged interval with its two ends.""",
        """
n = int(input())
intervals = sorted(tuple(map(int, input().split())) for _ in range(n))
merged = [list(intervals[0])]
for l, r in intervals[1:]:
    if l <= merged[-1][1]:
        merged[-1][1] = max(merged[-1][1], r)
    else:
        merged.append([l, r])
for l, r in merged:
    print(l, r)
""",
        _intervals,
        [("4\n1 3\n8 10\n2 6\n10 12", "1 6\n8 12")], edges=["1\n5 5", "2\n1 2\n3 4"],
    ),
    problem(
        "activity_selection", "Most meetings", 3, "train",
        """Meeting i occupies the time from s_i to e_i, with s_i < e_i; a meeting may start exactly when another one
ends. Print the largest number of meetings that can be held in one room without overlap.

Input: the first line holds n (1 <= n <= 1000); then n lines with s_i and e_i (0 <= s_i < e_i <= 10^6).
Output: the largest number of meetings.""",
        """
n = int(input())
meetings = [tuple(map(int, input().split())) for _ in range(n)]
meetings.sort(key=lambda m: m[1])
count = 0
free_at = -1
for s, e in meetings:
    if s >= free_at:
        count += 1
        free_at = e
print(count)
""",
        lambda rng: _intervals(rng, half_open=True),
        [("4\n1 3\n2 4\n3 5\n0 7", "2")], edges=["1\n0 1", "2\n1 2\n2 3"],
    ),
    problem(
        "count_at_most", "How many are small enough", 3, "train",
        """Answer q queries on a list of n integers: each query gives x and asks how many elements are at most x.

Input: the first line holds n and q (1 <= n, q <= 10^4); the second line holds the n integers (between -10^9 and
10^9); then q lines with one integer x each.
Output: q lines with the counts.""",
        """
n, q = map(int, input().split())
a = sorted(map(int, input().split()))
out = []
for _ in range(q):
    x = int(input())
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    out.append(lo)
print("\\n".join(map(str, out)))
""",
        lambda rng: _queries(rng, 30, -20, 20, lambda n: str(ri(rng, -25, 25))),
        [("5 3\n4 1 7 1 3\n1\n5\n0", "2\n4\n0")], edges=["1 2\n5\n5\n4"],
    ),
    problem(
        "longest_window", "Longest affordable stretch", 3, "val",
        """Given n non-negative integers and a budget S, print the length of the longest block of consecutive elements
whose sum is at most S (0 if no single element fits).

Input: the first line holds n and S (1 <= n <= 10^4, 0 <= S <= 10^9); the second line holds n integers between 0
and 10^4.
Output: the length of the longest block with sum at most S.""",
        """
n, s = map(int, input().split())
a = list(map(int, input().split()))
best = 0
total = 0
left = 0
for right in range(n):
    total += a[right]
    while total > s:
        total -= a[left]
        left += 1
    best = max(best, right - left + 1)
print(best)
""",
        lambda rng: (lambda n: f"{n} {ri(rng, 0, 60)}\n{line(ints(rng, n, 0, 20))}")(ri(rng, 1, 15)),
        [("6 7\n2 1 5 1 1 3", "3")], edges=["1 0\n1", "3 0\n0 0 0"],
    ),
    problem(
        "sliding_max", "Window maximum", 3, "test",
        """For every block of k consecutive elements of a list (from left to right) print the largest element of the
block.

Input: the first line holds n and k (1 <= k <= n <= 10^4); the second line holds n integers between -10^6 and
10^6.
Output: n - k + 1 integers on one line, separated by spaces.""",
        """
from collections import deque

n, k = map(int, input().split())
a = list(map(int, input().split()))
window = deque()
out = []
for i in range(n):
    while window and a[window[-1]] <= a[i]:
        window.pop()
    window.append(i)
    if window[0] <= i - k:
        window.popleft()
    if i >= k - 1:
        out.append(a[window[0]])
print(" ".join(map(str, out)))
""",
        lambda rng: (lambda n: f"{n} {ri(rng, 1, n)}\n{line(ints(rng, n, -50, 50))}")(ri(rng, 1, 15)),
        [("8 3\n1 3 -1 -3 5 3 6 7", "3 3 5 5 6 7")], edges=["1 1\n4", "3 3\n2 9 1"],
    ),
    problem(
        "grid_paths", "Paths around obstacles", 3, "train",
        """A grid has r rows and c columns of free cells (.) and obstacles (#). Count the paths from the top-left cell
to the bottom-right cell that only move right or down and never enter an obstacle, modulo 1000000007. Both
corner cells are free.

Input: the first line holds r and c (1 <= r, c <= 100); then r lines of c characters.
Output: the number of paths modulo 1000000007.""",
        """
MOD = 1000000007
r, c = map(int, input().split())
g = [input().strip() for _ in range(r)]
ways = [[0] * c for _ in range(r)]
ways[0][0] = 1
for i in range(r):
    for j in range(c):
        if g[i][j] == "#":
            ways[i][j] = 0
            continue
        if i > 0:
            ways[i][j] += ways[i - 1][j]
        if j > 0:
            ways[i][j] += ways[i][j - 1]
        ways[i][j] %= MOD
print(ways[r - 1][c - 1])
""",
        _path_grid,
        [("3 3\n...\n.#.\n...", "2")], edges=["1 1\n.", "2 2\n.#\n#."],
    ),
    problem(
        "min_path_sum", "Cheapest descent", 3, "train",
        """A grid of r rows and c columns holds a cost in every cell. Walk from the top-left cell to the bottom-right
cell moving only right or down; the cost of a walk is the sum of the costs of the cells it visits (both ends
included). Print the least cost.

Input: the first line holds r and c (1 <= r, c <= 100); then r lines with c integers between 0 and 1000.
Output: the least cost.""",
        """
r, c = map(int, input().split())
g = [list(map(int, input().split())) for _ in range(r)]
for i in range(r):
    for j in range(c):
        if i == 0 and j == 0:
            continue
        if i == 0:
            g[i][j] += g[i][j - 1]
        elif j == 0:
            g[i][j] += g[i - 1][j]
        else:
            g[i][j] += min(g[i - 1][j], g[i][j - 1])
print(g[r - 1][c - 1])
""",
        lambda rng: (lambda r, c: f"{r} {c}\n" + "\n".join(line(ints(rng, c, 0, 9)) for _ in range(r)))(ri(rng, 1, 6), ri(rng, 1, 6)),
        [("3 3\n1 3 1\n1 5 1\n4 2 1", "7")], edges=["1 1\n5"],
    ),
    problem(
        "stairs", "Climbing stairs", 3, "val",
        """You climb a staircase of n steps, taking 1, 2 or 3 steps at a time. Count the different sequences of moves
that reach the top exactly, modulo 1000000007.

Input: one integer n (1 <= n <= 10^4).
Output: the number of ways modulo 1000000007.""",
        """
MOD = 1000000007
n = int(input())
ways = [0] * (n + 1)
ways[0] = 1
for i in range(1, n + 1):
    total = 0
    for step in (1, 2, 3):
        if i - step >= 0:
            total += ways[i - step]
    ways[i] = total % MOD
print(ways[n])
""",
        lambda rng: str(ri(rng, 1, 10**4) if rng.random() < 0.3 else ri(rng, 1, 30)),
        [("4", "7")], edges=["1", "2"],
    ),
    problem(
        "equal_partition", "Fair split", 3, "test",
        """Can a list of positive integers be split into two groups with equal sums? Every element goes to exactly
one group.

Input: the first line holds n (1 <= n <= 30); the second line holds n integers between 1 and 100.
Output: YES if such a split exists, otherwise NO.""",
        """
n = int(input())
a = list(map(int, input().split()))
total = sum(a)
if total % 2 == 1:
    print("NO")
else:
    half = total // 2
    reachable = [False] * (half + 1)
    reachable[0] = True
    for x in a:
        for s in range(half, x - 1, -1):
            if reachable[s - x]:
                reachable[s] = True
    print("YES" if reachable[half] else "NO")
""",
        lambda rng: sized_list(rng, 30, 1, 10 if rng.random() < 0.6 else 100),
        [("4\n1 5 11 5", "YES")], edges=["1\n2", "2\n3 3"],
    ),
    problem(
        "longest_palindrome", "Longest palindromic block", 3, "train",
        """Print the length of the longest block of consecutive letters of a word that reads the same backwards.

Input: one line with a word of 1 to 200 lowercase English letters.
Output: the length of the longest palindromic block.""",
        """
s = input().strip()
n = len(s)
best = 1
for center in range(2 * n - 1):
    lo = center // 2
    hi = lo + center % 2
    while lo >= 0 and hi < n and s[lo] == s[hi]:
        lo -= 1
        hi += 1
    best = max(best, hi - lo - 1)
print(best)
""",
        lambda rng: word(rng, 1, 40, "ab" if rng.random() < 0.5 else "abc"),
        [("babad", "3")], edges=["a", "ab"],
    ),
    problem(
        "stock_profit", "One trade", 3, "train",
        """The price of a share on day i is p_i. Buy once and later sell once (on a later day) to make the largest
profit. Print that profit, or 0 if no trade makes money.

Input: the first line holds n (1 <= n <= 10^4); the second line holds n prices between 1 and 10^6.
Output: the largest profit.""",
        """
n = int(input())
prices = list(map(int, input().split()))
lowest = prices[0]
best = 0
for p in prices[1:]:
    if p - lowest > best:
        best = p - lowest
    if p < lowest:
        lowest = p
print(best)
""",
        lambda rng: sized_list(rng, 300, 1, 20 if rng.random() < 0.5 else 10**6),
        [("6\n7 1 5 3 6 4", "5")], edges=["1\n5", "3\n5 4 3"],
    ),
    problem(
        "bipartite", "Two teams", 3, "val",
        """An undirected graph has n vertices numbered 1 to n and m edges. Can the vertices be split into two teams so
that every edge joins vertices of different teams?

Input: the first line holds n and m (1 <= n <= 1000, 0 <= m <= 10^4); then m lines with two vertices u v (u != v).
Output: YES if such a split exists, otherwise NO.""",
        """
from collections import deque

n, m = map(int, input().split())
adj = [[] for _ in range(n + 1)]
for _ in range(m):
    u, v = map(int, input().split())
    adj[u].append(v)
    adj[v].append(u)
color = [-1] * (n + 1)
ok = True
for start in range(1, n + 1):
    if color[start] != -1:
        continue
    color[start] = 0
    queue = deque([start])
    while queue and ok:
        u = queue.popleft()
        for v in adj[u]:
            if color[v] == -1:
                color[v] = 1 - color[u]
                queue.append(v)
            elif color[v] == color[u]:
                ok = False
print("YES" if ok else "NO")
""",
        _graph,
        [("4 4\n1 2\n2 3\n3 4\n4 1", "YES")], edges=["1 0", "3 3\n1 2\n2 3\n1 3"],
    ),
    problem(
        "next_greater", "Next greater element", 3, "test",
        """For every element of a list print the first element to its right that is strictly greater, or -1 if there
is none.

Input: the first line holds n (1 <= n <= 10^4); the second line holds n integers between -10^6 and 10^6.
Output: n integers on one line, separated by spaces.""",
        """
n = int(input())
a = list(map(int, input().split()))
result = [-1] * n
stack = []
for i in range(n):
    while stack and a[stack[-1]] < a[i]:
        result[stack.pop()] = a[i]
    stack.append(i)
print(" ".join(map(str, result)))
""",
        lambda rng: sized_list(rng, 200, -10 if rng.random() < 0.5 else -10**6, 10 if rng.random() < 0.5 else 10**6),
        [("5\n2 7 3 5 4", "7 -1 5 -1 -1")], edges=["1\n3", "3\n5 5 5"],
    ),
    problem(
        "subarrays_sum_k", "Blocks with a given sum", 3, "train",
        """Count the blocks of consecutive elements of a list (of any length at least 1) whose sum is exactly k.

Input: the first line holds n and k (1 <= n <= 10^4, -10^9 <= k <= 10^9); the second line holds n integers
between -1000 and 1000.
Output: the number of such blocks.""",
        """
n, k = map(int, input().split())
a = list(map(int, input().split()))
seen = {0: 1}
total = 0
count = 0
for x in a:
    total += x
    count += seen.get(total - k, 0)
    seen[total] = seen.get(total, 0) + 1
print(count)
""",
        lambda rng: (lambda n: f"{n} {ri(rng, -5, 5)}\n{line(ints(rng, n, -3, 3))}")(ri(rng, 1, 20)),
        [("5 3\n1 2 1 2 1", "4")], edges=["1 0\n0", "3 0\n0 0 0"],
    ),
]
