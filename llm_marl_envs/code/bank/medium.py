"""Difficulty 2: loops over lists and strings, sorting, counting, number bases."""

from __future__ import annotations

from ._helpers import ints, line, problem, ri, sized_list, word

ROMAN = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
         (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]


def _roman(n: int) -> str:
    out = ""
    for value, symbol in ROMAN:
        while n >= value:
            out += symbol
            n -= value
    return out


def _sorted_list(rng, n, lo, hi):
    return sorted(ints(rng, n, lo, hi))


def _distinct_with_k(rng) -> str:
    if rng.random() < 0.7:
        values = sorted(set(ints(rng, ri(rng, 1, 15), -30, 30)))
    else:
        values = [int(x) - 10_000 for x in rng.choice(20_001, ri(rng, 1, 200), replace=False)]
    return f"{len(values)} {ri(rng, 1, 6)}\n{line(values)}"


def _brackets(rng) -> str:
    if rng.random() < 0.5:  # balanced by construction
        out, stack = [], []
        for _ in range(ri(rng, 1, 20)):
            if stack and rng.random() < 0.5:
                out.append({"(": ")", "[": "]", "{": "}"}[stack.pop()])
            else:
                ch = "([{"[ri(rng, 0, 2)]
                stack.append(ch)
                out.append(ch)
        out += [{"(": ")", "[": "]", "{": "}"}[c] for c in reversed(stack)]
        return "".join(out)
    return word(rng, 1, 12, "()[]{}")


PROBLEMS = [
    problem(
        "sort_numbers", "Sort the numbers", 2, "train",
        """Print n integers in non-decreasing order.

Input: the first line holds n (1 <= n <= 1000); the second line holds n integers between -10^6 and 10^6.
Output: the sorted integers on one line, separated by spaces.""",
        """
n = int(input())
a = list(map(int, input().split()))
for i in range(1, n):
    x = a[i]
    j = i - 1
    while j >= 0 and a[j] > x:
        a[j + 1] = a[j]
        j -= 1
    a[j + 1] = x
print(" ".join(map(str, a)))
""",
        lambda rng: sized_list(rng, 300, -10**6, 10**6),
        [("5\n3 1 4 1 5", "1 1 3 4 5")], edges=["1\n0"],
    ),
    problem(
        "sort_words", "Order words", 2, "train",
        """Sort n words by length, shortest first; words of the same length go in alphabetical order.

Input: the first line holds n (1 <= n <= 100); the second line holds n words of lowercase letters (1 to 10
letters each), separated by spaces.
Output: the sorted words on one line, separated by spaces.""",
        """
n = int(input())
words = input().split()
for i in range(1, n):
    j = i
    while j > 0 and (len(words[j - 1]) > len(words[j]) or (len(words[j - 1]) == len(words[j]) and words[j - 1] > words[j])):
        words[j - 1], words[j] = words[j], words[j - 1]
        j -= 1
print(" ".join(words))
""",
        lambda rng: (lambda n: f"{n}\n" + " ".join(word(rng, 1, 6, "abcd") for _ in range(n)))(ri(rng, 1, 30)),
        [("4\npear fig apple kiwi", "fig kiwi pear apple")], edges=["1\nz"],
    ),
    problem(
        "count_distinct", "Distinct values", 2, "train",
        """Count the distinct values among n integers.

Input: the first line holds n (1 <= n <= 1000); the second line holds n integers between -10^9 and 10^9.
Output: the number of distinct values.""",
        """
n = int(input())
a = sorted(map(int, input().split()))
count = 1
for i in range(1, n):
    if a[i] != a[i - 1]:
        count += 1
print(count)
""",
        lambda rng: sized_list(rng, 1000, -5 if rng.random() < 0.5 else -10**9, 5 if rng.random() < 0.5 else 10**9),
        [("6\n1 2 2 3 3 3", "3")], edges=["1\n8"],
    ),
    problem(
        "prefix_sums", "Running totals", 2, "val",
        """Print the running totals of a list: the i-th printed value is the sum of the first i values.

Input: the first line holds n (1 <= n <= 1000); the second line holds n integers between -1000 and 1000.
Output: n integers on one line, separated by spaces.""",
        """
n = int(input())
a = list(map(int, input().split()))
total = 0
out = []
for x in a:
    total += x
    out.append(total)
print(" ".join(map(str, out)))
""",
        lambda rng: sized_list(rng, 1000, -1000, 1000),
        [("4\n1 2 3 -4", "1 3 6 2")], edges=["1\n-7"],
    ),
    problem(
        "anagram", "Anagrams", 2, "test",
        """Two words are anagrams if one is a rearrangement of the letters of the other. Decide whether two words are
anagrams.

Input: two lines, each with a word of 1 to 100 lowercase English letters.
Output: YES if the words are anagrams, otherwise NO.""",
        """
a = input().strip()
b = input().strip()
if len(a) != len(b):
    print("NO")
else:
    counts = [0] * 26
    for ch in a:
        counts[ord(ch) - 97] += 1
    for ch in b:
        counts[ord(ch) - 97] -= 1
    print("YES" if all(c == 0 for c in counts) else "NO")
""",
        lambda rng: (lambda w: f"{w}\n" + ("".join(rng.permutation(list(w))) if rng.random() < 0.5 else word(rng, 1, 8, "abc")))(word(rng, 1, 8, "abc")),
        [("listen\nsilent", "YES")], edges=["ab\nabc", "aab\nabb"],
    ),
    problem(
        "caesar", "Caesar cipher", 2, "train",
        """Shift every letter of a line k places forward in the alphabet, wrapping around from z to a. Spaces stay as
they are.

Input: the first line holds k (0 <= k <= 25); the second line holds 1 to 200 characters: lowercase letters and
spaces, starting and ending with a letter.
Output: the shifted line.""",
        """
k = int(input())
s = input()
out = []
for ch in s:
    if ch == " ":
        out.append(ch)
    else:
        out.append(chr((ord(ch) - ord("a") + k) % 26 + ord("a")))
print("".join(out))
""",
        lambda rng: f"{ri(rng, 0, 25)}\n" + " ".join(word(rng, 1, 8) for _ in range(ri(rng, 1, 6))),
        [("3\nxyz abc", "abc def")], edges=["25\nz"],
    ),
    problem(
        "run_length", "Run-length encoding", 2, "train",
        """Compress a word by replacing every maximal block of equal letters with the letter followed by the length of
the block.

Input: one line with a word of 1 to 200 lowercase English letters.
Output: the encoded word.""",
        """
s = input().strip()
out = []
i = 0
while i < len(s):
    j = i
    while j < len(s) and s[j] == s[i]:
        j += 1
    out.append(s[i] + str(j - i))
    i = j
print("".join(out))
""",
        lambda rng: "".join(ch * ri(rng, 1, 12) for ch in word(rng, 1, 8, "abc")),
        [("aaabccdddd", "a3b1c2d4")], edges=["z"],
    ),
    problem(
        "transpose", "Transpose a matrix", 2, "train",
        """Print the transpose of an r x c matrix: its columns become rows.

Input: the first line holds r and c (1 <= r, c <= 20); then r lines with c integers each (between -100 and 100).
Output: c lines with r integers each, separated by spaces.""",
        """
r, c = map(int, input().split())
m = [list(map(int, input().split())) for _ in range(r)]
for j in range(c):
    print(" ".join(str(m[i][j]) for i in range(r)))
""",
        lambda rng: (lambda r, c: f"{r} {c}\n" + "\n".join(line(ints(rng, c, -100, 100)) for _ in range(r)))(ri(rng, 1, 6), ri(rng, 1, 6)),
        [("2 3\n1 2 3\n4 5 6", "1 4\n2 5\n3 6")], edges=["1 1\n5"],
    ),
    problem(
        "diagonals", "Diagonal difference", 2, "val",
        """For an n x n matrix print the absolute difference between the sum of its main diagonal (top left to bottom
right) and the sum of its other diagonal (top right to bottom left).

Input: the first line holds n (1 <= n <= 50); then n lines with n integers each (between -100 and 100).
Output: the absolute difference.""",
        """
n = int(input())
m = [list(map(int, input().split())) for _ in range(n)]
main = 0
anti = 0
for i in range(n):
    main += m[i][i]
    anti += m[i][n - 1 - i]
print(abs(main - anti))
""",
        lambda rng: (lambda n: f"{n}\n" + "\n".join(line(ints(rng, n, -100, 100)) for _ in range(n)))(ri(rng, 1, 7)),
        [("3\n1 2 3\n4 5 6\n9 8 9", "2")], edges=["1\n5"],
    ),
    problem(
        "primes_up_to", "Primes up to n", 2, "test",
        """Print all prime numbers that are at most n, in increasing order, or NONE if there are none.

Input: one integer n (1 <= n <= 2000).
Output: the primes on one line, separated by spaces, or NONE.""",
        """
n = int(input())
primes = []
for x in range(2, n + 1):
    is_prime = True
    d = 2
    while d * d <= x:
        if x % d == 0:
            is_prime = False
            break
        d += 1
    if is_prime:
        primes.append(x)
print(" ".join(map(str, primes)) if primes else "NONE")
""",
        lambda rng: str(ri(rng, 1, 2000 if rng.random() < 0.3 else 40)),
        [("10", "2 3 5 7")], edges=["1", "2"],
    ),
    problem(
        "prime_check", "Prime or composite", 2, "train",
        """Classify a positive integer n: PRIME if it is prime, COMPOSITE if it has a divisor other than 1 and itself,
and NEITHER for n = 1.

Input: one integer n (1 <= n <= 10^10).
Output: PRIME, COMPOSITE or NEITHER.""",
        """
def kind(n):
    if n == 1:
        return "NEITHER"
    d = 2
    while d * d <= n:
        if n % d == 0:
            return "COMPOSITE"
        d += 1
    return "PRIME"


print(kind(int(input())))
""",
        lambda rng: str(rng.choice([ri(rng, 1, 100), ri(rng, 1, 10**10), 1000003 * ri(rng, 1, 9000), 9999999967, 49, 121])),
        [("97", "PRIME")], edges=["1", "4"],
    ),
    problem(
        "fibonacci", "Fibonacci number", 2, "train",
        """The Fibonacci numbers are F(0) = 0, F(1) = 1 and F(i) = F(i - 1) + F(i - 2). Print F(n).

Input: one integer n (0 <= n <= 90).
Output: F(n).""",
        """
n = int(input())
a, b = 0, 1
for _ in range(n):
    a, b = b, a + b
print(a)
""",
        lambda rng: str(ri(rng, 0, 90)),
        [("10", "55")], edges=["0", "1"],
    ),
    problem(
        "to_binary", "Binary representation", 2, "train",
        """Print the binary representation of a non-negative integer n, without leading zeros (0 is printed as 0).

Input: one integer n (0 <= n <= 10^18).
Output: n in base 2.""",
        """
n = int(input())
if n == 0:
    print(0)
else:
    bits = ""
    while n > 0:
        bits = str(n % 2) + bits
        n //= 2
    print(bits)
""",
        lambda rng: str(ri(rng, 0, 10**18) if rng.random() < 0.5 else ri(rng, 0, 64)),
        [("10", "1010")], edges=["0", "1"],
    ),
    problem(
        "to_base", "Change of base", 2, "val",
        """Write a non-negative integer n in base b. Digits above 9 are the capital letters A (10) to F (15).

Input: one line with n and b (0 <= n <= 10^12, 2 <= b <= 16).
Output: n in base b, without leading zeros (0 is printed as 0).""",
        """
DIGITS = "0123456789ABCDEF"
n, b = map(int, input().split())
if n == 0:
    print("0")
else:
    out = ""
    while n > 0:
        out = DIGITS[n % b] + out
        n //= b
    print(out)
""",
        lambda rng: f"{ri(rng, 0, 10**12) if rng.random() < 0.5 else ri(rng, 0, 300)} {ri(rng, 2, 16)}",
        [("255 16", "FF")], edges=["0 7", "16 16"],
    ),
    problem(
        "brackets", "Balanced brackets", 2, "test",
        """A string of brackets ()[]{} is balanced if every opening bracket is closed by the matching bracket in the
right order. Decide whether the string is balanced.

Input: one line with 1 to 200 characters, each one of ()[]{}.
Output: YES if it is balanced, otherwise NO.""",
        """
s = input().strip()
pairs = {")": "(", "]": "[", "}": "{"}
stack = []
ok = True
for ch in s:
    if ch in "([{":
        stack.append(ch)
    elif not stack or stack[-1] != pairs[ch]:
        ok = False
        break
    else:
        stack.pop()
print("YES" if ok and not stack else "NO")
""",
        _brackets,
        [("([]{})", "YES")], edges=["(]", "(("],
    ),
    problem(
        "inversions", "Counting inversions", 2, "train",
        """An inversion of a list a is a pair of positions i < j with a[i] > a[j]. Count the inversions.

Input: the first line holds n (1 <= n <= 300); the second line holds n integers between -1000 and 1000.
Output: the number of inversions.""",
        """
n = int(input())
a = list(map(int, input().split()))
count = 0
for i in range(n):
    for j in range(i + 1, n):
        if a[i] > a[j]:
            count += 1
print(count)
""",
        lambda rng: sized_list(rng, 300, -5 if rng.random() < 0.5 else -1000, 5 if rng.random() < 0.5 else 1000),
        [("4\n3 1 2 1", "4")], edges=["1\n5"],
    ),
    problem(
        "longest_run", "Longest run", 2, "train",
        """Print the length of the longest block of equal consecutive values in a list.

Input: the first line holds n (1 <= n <= 1000); the second line holds n integers between 0 and 9.
Output: the length of the longest block.""",
        """
n = int(input())
a = list(map(int, input().split()))
best = 1
current = 1
for i in range(1, n):
    if a[i] == a[i - 1]:
        current += 1
    else:
        current = 1
    best = max(best, current)
print(best)
""",
        lambda rng: sized_list(rng, 1000, 0, 1 if rng.random() < 0.5 else 9),
        [("7\n1 1 2 2 2 1 2", "3")], edges=["1\n4", "3\n5 5 5"],
    ),
    problem(
        "pair_sum", "A pair with a given sum", 2, "train",
        """Decide whether two values at different positions of a list add up to a target t.

Input: the first line holds n and t (1 <= n <= 1000, -2000 <= t <= 2000); the second line holds n integers
between -1000 and 1000.
Output: YES if such a pair exists, otherwise NO.""",
        """
n, t = map(int, input().split())
a = list(map(int, input().split()))
seen = set()
found = False
for x in a:
    if t - x in seen:
        found = True
    seen.add(x)
print("YES" if found else "NO")
""",
        lambda rng: (lambda n, m: f"{n} {ri(rng, -2 * m, 2 * m)}\n{line(ints(rng, n, -m, m))}")(ri(rng, 1, 12), 10 if rng.random() < 0.6 else 1000),
        [("4 9\n2 7 11 15", "YES")], edges=["1 10\n5", "2 10\n5 5"],
    ),
    problem(
        "mode", "Most common value", 2, "val",
        """Print the value that occurs most often in a list. If several values are tied, print the smallest.

Input: the first line holds n (1 <= n <= 1000); the second line holds n integers between -100 and 100.
Output: the most common value.""",
        """
n = int(input())
a = list(map(int, input().split()))
counts = {}
for x in a:
    counts[x] = counts.get(x, 0) + 1
best = min(a)
for x, c in counts.items():
    if c > counts[best] or (c == counts[best] and x < best):
        best = x
print(best)
""",
        lambda rng: sized_list(rng, 1000, -4 if rng.random() < 0.5 else -100, 4 if rng.random() < 0.5 else 100),
        [("6\n3 1 3 2 1 4", "1")], edges=["1\n-9"],
    ),
    problem(
        "median", "Lower median", 2, "test",
        """Sort a list of n integers; the lower median is the value at position (n + 1) // 2 (counting from 1) of the
sorted list. Print it.

Input: the first line holds n (1 <= n <= 1000); the second line holds n integers between -10^6 and 10^6.
Output: the lower median.""",
        """
n = int(input())
a = sorted(map(int, input().split()))
print(a[(n - 1) // 2])
""",
        lambda rng: sized_list(rng, 1000, -10**6, 10**6),
        [("4\n8 1 5 3", "3")], edges=["1\n7", "2\n9 2"],
    ),
    problem(
        "merge_sorted", "Merge two sorted lists", 2, "train",
        """Merge two lists that are already sorted in non-decreasing order into one sorted list.

Input: the first line holds n, then a line with n sorted integers; then a line with m and a line with m sorted
integers (1 <= n, m <= 1000, values between -10^6 and 10^6).
Output: the n + m merged values on one line, separated by spaces.""",
        """
n = int(input())
a = list(map(int, input().split()))
m = int(input())
b = list(map(int, input().split()))
i = j = 0
out = []
while i < n and j < m:
    if a[i] <= b[j]:
        out.append(a[i])
        i += 1
    else:
        out.append(b[j])
        j += 1
out.extend(a[i:])
out.extend(b[j:])
print(" ".join(map(str, out)))
""",
        lambda rng: (lambda n, m, v: f"{n}\n{line(_sorted_list(rng, n, -v, v))}\n{m}\n{line(_sorted_list(rng, m, -v, v))}")(
            ri(rng, 1, 10), ri(rng, 1, 10), 10 if rng.random() < 0.5 else 10**6),
        [("3\n1 4 9\n2\n2 4", "1 2 4 4 9")], edges=["1\n5\n1\n5"],
    ),
    problem(
        "rotate", "Rotate a list", 2, "train",
        """Rotate a list k places to the right: the last element moves to the front, k times.

Input: the first line holds n and k (1 <= n <= 1000, 0 <= k <= 10^9); the second line holds n integers.
Output: the rotated list on one line, separated by spaces.""",
        """
n, k = map(int, input().split())
a = input().split()
k %= n
print(" ".join(a[n - k:] + a[:n - k]))
""",
        lambda rng: (lambda n: f"{n} {ri(rng, 0, 10**9) if rng.random() < 0.4 else ri(rng, 0, 2 * n)}\n{line(ints(rng, n, -99, 99))}")(ri(rng, 1, 12)),
        [("5 2\n1 2 3 4 5", "4 5 1 2 3")], edges=["3 3\n1 2 3", "1 0\n7"],
    ),
    problem(
        "pairs_difference", "Pairs with a difference", 2, "train",
        """Given n distinct integers and k >= 1, count the unordered pairs of them whose difference is exactly k.

Input: the first line holds n and k (1 <= n <= 1000, 1 <= k <= 100); the second line holds n distinct integers
between -10^4 and 10^4.
Output: the number of pairs.""",
        """
n, k = map(int, input().split())
values = set(map(int, input().split()))
count = 0
for x in values:
    if x + k in values:
        count += 1
print(count)
""",
        _distinct_with_k,
        [("5 2\n1 5 3 4 2", "3")], edges=["1 1\n0"],
    ),
    problem(
        "collatz", "Collatz steps", 2, "val",
        """Starting from n, repeatedly replace n by n / 2 if it is even and by 3n + 1 if it is odd, until n = 1. Print
the number of replacements.

Input: one integer n (1 <= n <= 10^6).
Output: the number of steps to reach 1.""",
        """
n = int(input())
steps = 0
while n != 1:
    if n % 2 == 0:
        n //= 2
    else:
        n = 3 * n + 1
    steps += 1
print(steps)
""",
        lambda rng: str(ri(rng, 1, 10**6) if rng.random() < 0.5 else ri(rng, 1, 30)),
        [("6", "8")], edges=["1", "2"],
    ),
    problem(
        "digital_root", "Digital root", 2, "test",
        """Replace a non-negative integer by the sum of its digits until a single digit remains. Print that digit.

Input: one integer n (0 <= n <= 10^18).
Output: the digital root of n.""",
        """
n = int(input())
while n >= 10:
    s = 0
    while n > 0:
        s += n % 10
        n //= 10
    n = s
print(n)
""",
        lambda rng: str(ri(rng, 0, 10**18) if rng.random() < 0.5 else ri(rng, 0, 200)),
        [("9875", "2")], edges=["0", "10"],
    ),
    problem(
        "lcm_list", "Least common multiple", 2, "train",
        """Print the least common multiple of n positive integers.

Input: the first line holds n (1 <= n <= 10); the second line holds n integers between 1 and 50.
Output: their least common multiple.""",
        """
def gcd(a, b):
    while b:
        a, b = b, a % b
    return a


n = int(input())
result = 1
for x in map(int, input().split()):
    result = result * x // gcd(result, x)
print(result)
""",
        lambda rng: sized_list(rng, 10, 1, 50),
        [("3\n4 6 10", "60")], edges=["1\n7"],
    ),
    problem(
        "palindromic_substrings", "Palindromic substrings", 2, "train",
        """Count the substrings of a word that are palindromes. Substrings at different positions count separately
even when they are equal.

Input: one line with a word of 1 to 60 lowercase English letters.
Output: the number of palindromic substrings.""",
        """
s = input().strip()
n = len(s)
count = 0
for i in range(n):
    for j in range(i + 1, n + 1):
        t = s[i:j]
        if t == t[::-1]:
            count += 1
print(count)
""",
        lambda rng: word(rng, 1, 60 if rng.random() < 0.3 else 10, "ab" if rng.random() < 0.5 else "abc"),
        [("aaa", "6")], edges=["a", "ab"],
    ),
    problem(
        "word_frequency", "Word frequencies", 2, "train",
        """Count how often each word occurs in a line. Print one line per distinct word with the word and its count,
most frequent first; words with equal counts in alphabetical order.

Input: one line with 1 to 100 words of lowercase letters separated by single spaces.
Output: one line per distinct word: the word, a space, its count.""",
        """
words = input().split()
counts = {}
for w in words:
    counts[w] = counts.get(w, 0) + 1
for w, c in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
    print(w, c)
""",
        lambda rng: " ".join(word(rng, 1, 2, "abc") for _ in range(ri(rng, 1, 20))),
        [("to be or not to be", "be 2\nto 2\nnot 1\nor 1")], edges=["hi"],
    ),
    problem(
        "roman_to_int", "Roman numeral to integer", 2, "val",
        """Convert a Roman numeral (symbols I=1, V=5, X=10, L=50, C=100, D=500, M=1000, written in the standard
subtractive form such as IV = 4 and XC = 90) to an integer.

Input: one line with a valid Roman numeral for a value between 1 and 3999.
Output: its value.""",
        """
VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
s = input().strip()
total = 0
for i in range(len(s)):
    v = VALUES[s[i]]
    if i + 1 < len(s) and VALUES[s[i + 1]] > v:
        total -= v
    else:
        total += v
print(total)
""",
        lambda rng: _roman(ri(rng, 1, 3999)),
        [("MCMXCIV", "1994")], edges=["I", "MMMCMXCIX"],
    ),
    problem(
        "int_to_roman", "Integer to Roman numeral", 2, "test",
        """Write an integer between 1 and 3999 as a Roman numeral in the standard subtractive form (symbols I=1, V=5,
X=10, L=50, C=100, D=500, M=1000; 4 = IV, 9 = IX, 40 = XL, 90 = XC, 400 = CD, 900 = CM).

Input: one integer n (1 <= n <= 3999).
Output: n as a Roman numeral.""",
        """
VALUES = [1000, 900, 500, 400, 100, 90, 50, 40, 10, 9, 5, 4, 1]
SYMBOLS = ["M", "CM", "D", "CD", "C", "XC", "L", "XL", "X", "IX", "V", "IV", "I"]
n = int(input())
out = ""
for value, symbol in zip(VALUES, SYMBOLS):
    while n >= value:
        out += symbol
        n -= value
print(out)
""",
        lambda rng: str(ri(rng, 1, 3999)),
        [("1994", "MCMXCIV")], edges=["4", "3999"],
    ),
]
