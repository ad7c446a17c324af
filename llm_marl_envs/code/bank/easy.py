"""Difficulty 1: arithmetic, conditions and simple string handling."""

from __future__ import annotations

from ._helpers import LOWER, ints, line, problem, ri, sized_list, word

PROBLEMS = [
    problem(
        "sum_two", "Sum of two", 1, "train",
        """Read two integers a and b and print their sum.

Input: one line with two integers a and b (-10^9 <= a, b <= 10^9).
Output: one integer, a + b.""",
        """
a, b = map(int, input().split())
print(a + b)
""",
        lambda rng: f"{ri(rng, -10**9, 10**9)} {ri(rng, -10**9, 10**9)}",
        [("3 5", "8")], edges=["0 0", "-1000000000 -1000000000"],
    ),
    problem(
        "rectangle", "Rectangle area and perimeter", 1, "train",
        """A rectangle has width w and height h. Print its area and its perimeter.

Input: one line with two integers w and h (1 <= w, h <= 10^4).
Output: two integers separated by a space: the area, then the perimeter.""",
        """
w, h = map(int, input().split())
area = w * h
perimeter = 2 * (w + h)
print(area, perimeter)
""",
        lambda rng: f"{ri(rng, 1, 10**4)} {ri(rng, 1, 10**4 if rng.random() < 0.5 else 20)}",
        [("3 4", "12 14")], edges=["1 1"],
    ),
    problem(
        "max_of_three", "Largest of three", 1, "train",
        """Print the largest of three integers.

Input: one line with three integers x, y and z (-10^6 <= x, y, z <= 10^6).
Output: the largest of them.""",
        """
x, y, z = map(int, input().split())
best = x
if y > best:
    best = y
if z > best:
    best = z
print(best)
""",
        lambda rng: line(ints(rng, 3, -10 if rng.random() < 0.5 else -10**6, 10 if rng.random() < 0.5 else 10**6)),
        [("4 9 2", "9")], edges=["5 5 5", "-3 -1 -2"],
    ),
    problem(
        "parity", "Even or odd", 1, "val",
        """Decide whether an integer n is even or odd.

Input: one integer n (-10^9 <= n <= 10^9).
Output: EVEN if n is even, otherwise ODD.""",
        """
n = int(input())
if n % 2 == 0:
    print("EVEN")
else:
    print("ODD")
""",
        lambda rng: str(ri(rng, -10**9, 10**9) if rng.random() < 0.5 else ri(rng, -20, 20)),
        [("7", "ODD")], edges=["0", "-3"],
    ),
    problem(
        "fahrenheit", "Celsius to Fahrenheit", 1, "test",
        """Convert a temperature C in degrees Celsius to degrees Fahrenheit with the formula F = C * 9 / 5 + 32,
rounded down to an integer (towards negative infinity).

Input: one integer C (-273 <= C <= 1000).
Output: one integer, F rounded down.""",
        """
c = int(input())
print(c * 9 // 5 + 32)
""",
        lambda rng: str(ri(rng, -273, 1000)),
        [("37", "98")], edges=["-40", "-1"],
    ),
    problem(
        "reverse_string", "Reverse a word", 1, "train",
        """Print a word written backwards.

Input: one line with a word of 1 to 100 lowercase English letters.
Output: the word reversed.""",
        """
s = input().strip()
out = ""
for i in range(len(s) - 1, -1, -1):
    out += s[i]
print(out)
""",
        lambda rng: word(rng, 1, 100 if rng.random() < 0.3 else 10),
        [("hello", "olleh")], edges=["a"],
    ),
    problem(
        "count_vowels", "Count the vowels", 1, "train",
        """Count the vowels (a, e, i, o, u) in a line of text.

Input: one line of 1 to 200 characters: lowercase English letters and spaces.
Output: the number of vowels in the line.""",
        """
s = input()
count = 0
for ch in s:
    if ch in "aeiou":
        count += 1
print(count)
""",
        lambda rng: " ".join(word(rng, 1, 8) for _ in range(ri(rng, 1, 12))),
        [("hello world", "3")], edges=["xyz"],
    ),
    problem(
        "digit_sum", "Digit sum", 1, "train",
        """Print the sum of the decimal digits of a non-negative integer n.

Input: one integer n (0 <= n <= 10^18).
Output: the sum of the digits of n.""",
        """
n = int(input())
total = 0
while n > 0:
    total += n % 10
    n //= 10
print(total)
""",
        lambda rng: str(ri(rng, 0, 10**18) if rng.random() < 0.5 else ri(rng, 0, 999)),
        [("1234", "10")], edges=["0", "1000000000000000000"],
    ),
    problem(
        "leap_year", "Leap year", 1, "val",
        """In the Gregorian calendar a year is a leap year if it is divisible by 4, except years divisible by 100,
which are leap years only if they are also divisible by 400. Decide whether year y is a leap year.

Input: one integer y (1 <= y <= 10000).
Output: YES if y is a leap year, otherwise NO.""",
        """
y = int(input())
if y % 400 == 0 or (y % 4 == 0 and y % 100 != 0):
    print("YES")
else:
    print("NO")
""",
        lambda rng: str(ri(rng, 1, 10000) if rng.random() < 0.5 else 100 * ri(rng, 1, 100) + ri(rng, 0, 1) * 4 * ri(rng, 0, 1)),
        [("2024", "YES")], edges=["1900", "2000"],
    ),
    problem(
        "clock", "Minutes to clock time", 1, "test",
        """m minutes have passed since midnight. Print the time on a 24-hour clock as HH:MM, with two digits for the
hours and two for the minutes.

Input: one integer m (0 <= m < 1440).
Output: the time as HH:MM.""",
        """
m = int(input())
hours = m // 60
minutes = m % 60
print(str(hours).zfill(2) + ":" + str(minutes).zfill(2))
""",
        lambda rng: str(ri(rng, 0, 1439)),
        [("75", "01:15")], edges=["0", "1439"],
    ),
    problem(
        "triangular", "Triangular number", 1, "train",
        """Print 1 + 2 + ... + n.

Input: one integer n (1 <= n <= 10^9).
Output: the sum of the integers from 1 to n.""",
        """
n = int(input())
print(n * (n + 1) // 2)
""",
        lambda rng: str(ri(rng, 1, 10**9) if rng.random() < 0.5 else ri(rng, 1, 50)),
        [("4", "10")], edges=["1"],
    ),
    problem(
        "list_sum", "Sum of a list", 1, "train",
        """Print the sum of n integers.

Input: the first line holds n (1 <= n <= 1000); the second line holds n integers, each between -10^6 and 10^6.
Output: their sum.""",
        """
n = int(input())
values = list(map(int, input().split()))
total = 0
for i in range(n):
    total += values[i]
print(total)
""",
        lambda rng: sized_list(rng, 1000, -10**6, 10**6),
        [("3\n1 2 3", "6")], edges=["1\n-5"],
    ),
    problem(
        "min_max", "Minimum and maximum", 1, "train",
        """Print the smallest and the largest of n integers.

Input: the first line holds n (1 <= n <= 1000); the second line holds n integers between -10^9 and 10^9.
Output: the minimum and the maximum, separated by a space.""",
        """
n = int(input())
a = list(map(int, input().split()))
lo = a[0]
hi = a[0]
for x in a[1:]:
    if x < lo:
        lo = x
    if x > hi:
        hi = x
print(lo, hi)
""",
        lambda rng: sized_list(rng, 1000, -10**9, 10**9),
        [("5\n3 -1 4 1 5", "-1 5")], edges=["1\n7"],
    ),
    problem(
        "sign_counts", "Positive, negative, zero", 1, "val",
        """Count how many of n integers are positive, how many are negative and how many are zero.

Input: the first line holds n (1 <= n <= 1000); the second line holds n integers between -100 and 100.
Output: three integers separated by spaces: the number of positive, negative and zero values.""",
        """
n = int(input())
a = list(map(int, input().split()))
pos = neg = zero = 0
for x in a:
    if x > 0:
        pos += 1
    elif x < 0:
        neg += 1
    else:
        zero += 1
print(pos, neg, zero)
""",
        lambda rng: sized_list(rng, 1000, -3 if rng.random() < 0.5 else -100, 3 if rng.random() < 0.5 else 100),
        [("5\n1 -2 0 3 0", "2 1 2")], edges=["1\n0"],
    ),
    problem(
        "palindrome", "Palindrome word", 1, "test",
        """A word is a palindrome if it reads the same backwards. Decide whether the given word is a palindrome.

Input: one line with a word of 1 to 100 lowercase English letters.
Output: YES if the word is a palindrome, otherwise NO.""",
        """
def is_palindrome(s):
    i, j = 0, len(s) - 1
    while i < j:
        if s[i] != s[j]:
            return False
        i += 1
        j -= 1
    return True


s = input().strip()
print("YES" if is_palindrome(s) else "NO")
""",
        lambda rng: (lambda h: h + (word(rng, 0, 1, "ab") if rng.random() < 0.5 else "") + h[::-1])(word(rng, 1, 10, "abc"))
        if rng.random() < 0.5 else word(rng, 1, 12, "abc"),
        [("level", "YES")], edges=["a", "ab"],
    ),
    problem(
        "count_upper", "Capital letters", 1, "train",
        """Count the uppercase English letters in a line of text.

Input: one line of 1 to 200 characters: English letters, digits and spaces.
Output: the number of uppercase letters.""",
        """
s = input()
print(sum(1 for ch in s if "A" <= ch <= "Z"))
""",
        lambda rng: " ".join(word(rng, 1, 8, LOWER + LOWER.upper() + "0123456789") for _ in range(ri(rng, 1, 10))),
        [("Hello World 42", "2")], edges=["abc"],
    ),
    problem(
        "multiples", "First multiples", 1, "train",
        """Print the first k positive multiples of n: n, 2n, ..., kn.

Input: one line with two integers n and k (-1000 <= n <= 1000, 1 <= k <= 20).
Output: the k multiples on one line, separated by spaces.""",
        """
n, k = map(int, input().split())
print(" ".join(str(n * i) for i in range(1, k + 1)))
""",
        lambda rng: f"{ri(rng, -1000, 1000)} {ri(rng, 1, 20)}",
        [("3 4", "3 6 9 12")], edges=["0 3", "5 1"],
    ),
    problem(
        "abs_difference", "Distance on a line", 1, "train",
        """Two points lie on a number line at a and b. Print the distance between them.

Input: one line with two integers a and b (-10^9 <= a, b <= 10^9).
Output: |a - b|.""",
        """
a, b = map(int, input().split())
d = a - b
if d < 0:
    d = -d
print(d)
""",
        lambda rng: f"{ri(rng, -10**9, 10**9)} {ri(rng, -10**9, 10**9)}",
        [("3 -4", "7")], edges=["5 5"],
    ),
    problem(
        "triangle_kind", "Kind of triangle", 1, "val",
        """Three sticks have lengths a, b and c. If they cannot form a triangle with positive area, print invalid.
Otherwise print equilateral if all three lengths are equal, isosceles if exactly two are equal, and scalene if
all are different.

Input: one line with three integers a, b, c (1 <= a, b, c <= 100).
Output: one word: invalid, equilateral, isosceles or scalene.""",
        """
a, b, c = sorted(map(int, input().split()))
if a + b <= c:
    print("invalid")
elif a == b and b == c:
    print("equilateral")
elif a == b or b == c:
    print("isosceles")
else:
    print("scalene")
""",
        lambda rng: line(ints(rng, 3, 1, 10)) if rng.random() < 0.7 else line([ri(rng, 1, 100)] * 2 + [ri(rng, 1, 100)]),
        [("3 4 5", "scalene")], edges=["1 2 3", "2 2 3"],
    ),
    problem(
        "letter_grade", "Letter grade", 1, "test",
        """Convert a score to a letter grade: A for 90 to 100, B for 80 to 89, C for 70 to 79, D for 60 to 69 and F
below 60.

Input: one integer s (0 <= s <= 100).
Output: the letter grade.""",
        """
s = int(input())
if s >= 90:
    grade = "A"
elif s >= 80:
    grade = "B"
elif s >= 70:
    grade = "C"
elif s >= 60:
    grade = "D"
else:
    grade = "F"
print(grade)
""",
        lambda rng: str(ri(rng, 0, 100)),
        [("85", "B")], edges=["90", "59"],
    ),
    problem(
        "word_count", "Count the words", 1, "train",
        """Count the words in a line. Words are separated by one or more spaces; there may be spaces at the start and
at the end of the line.

Input: one line of at most 200 characters (lowercase letters and spaces) holding at least one word.
Output: the number of words.""",
        """
s = input()
count = 0
inside = False
for ch in s:
    if ch != " " and not inside:
        count += 1
        inside = True
    elif ch == " ":
        inside = False
print(count)
""",
        lambda rng: " " * ri(rng, 0, 2) + (" " * ri(rng, 1, 3)).join(word(rng, 1, 6) for _ in range(ri(rng, 1, 10))) + " " * ri(rng, 0, 2),
        [("the quick  brown fox", "4")], edges=["word"],
    ),
    problem(
        "frequent_letter", "Most frequent letter", 1, "train",
        """Find the letter that occurs most often in a word. If several letters are tied, print the one that comes
first in the alphabet.

Input: one line with a word of 1 to 100 lowercase English letters.
Output: the most frequent letter.""",
        """
s = input().strip()
counts = {}
for ch in s:
    counts[ch] = counts.get(ch, 0) + 1
best = None
for ch in sorted(counts):
    if best is None or counts[ch] > counts[best]:
        best = ch
print(best)
""",
        lambda rng: word(rng, 1, 30, "abcde"),
        [("banana", "a")], edges=["zyx"],
    ),
    problem(
        "average_floor", "Average rounded down", 1, "train",
        """Print the average of n integers, rounded down (towards negative infinity).

Input: the first line holds n (1 <= n <= 1000); the second line holds n integers between -10^6 and 10^6.
Output: the average rounded down.""",
        """
n = int(input())
a = list(map(int, input().split()))
total = 0
for x in a:
    total += x
print(total // n)
""",
        lambda rng: sized_list(rng, 1000, -10**6, 10**6),
        [("4\n1 2 3 5", "2")], edges=["2\n-1 0"],
    ),
    problem(
        "exact_power", "Exact power", 1, "val",
        """Print a raised to the power b, exactly.

Input: one line with two integers a and b (-10 <= a <= 10, 0 <= b <= 20).
Output: a^b (by convention 0^0 = 1).""",
        """
a, b = map(int, input().split())
result = 1
for _ in range(b):
    result *= a
print(result)
""",
        lambda rng: f"{ri(rng, -10, 10)} {ri(rng, 0, 20)}",
        [("2 10", "1024")], edges=["0 0", "-3 3"],
    ),
    problem(
        "swap_case", "Swap the case", 1, "test",
        """Turn every lowercase letter of a line into uppercase and every uppercase letter into lowercase; other
characters stay as they are.

Input: one line of 1 to 200 characters: English letters, digits and spaces.
Output: the line with the case of every letter swapped.""",
        """
s = input()
out = []
for ch in s:
    code = ord(ch)
    if 97 <= code <= 122:
        out.append(chr(code - 32))
    elif 65 <= code <= 90:
        out.append(chr(code + 32))
    else:
        out.append(ch)
print("".join(out))
""",
        lambda rng: " ".join(word(rng, 1, 8, LOWER + LOWER.upper() + "0123456789") for _ in range(ri(rng, 1, 8))),
        [("Hello World 7", "hELLO wORLD 7")],
    ),
    problem(
        "gcd_two", "Greatest common divisor", 1, "train",
        """Print the greatest common divisor of two positive integers.

Input: one line with two integers a and b (1 <= a, b <= 10^9).
Output: gcd(a, b).""",
        """
def gcd(a, b):
    while b != 0:
        a, b = b, a % b
    return a


a, b = map(int, input().split())
print(gcd(a, b))
""",
        lambda rng: (lambda g: f"{g * ri(rng, 1, 1000)} {g * ri(rng, 1, 1000)}")(ri(rng, 1, 10**6)),
        [("12 18", "6")], edges=["7 7", "1 1000000000"],
    ),
    problem(
        "digit_occurrences", "Counting a digit", 1, "train",
        """Write down all the integers from 1 to n. How many times does the digit d appear?

Input: one line with two integers n and d (1 <= n <= 10^4, 0 <= d <= 9).
Output: the number of occurrences of d.""",
        """
n, d = map(int, input().split())
count = 0
for x in range(1, n + 1):
    while x > 0:
        if x % 10 == d:
            count += 1
        x //= 10
print(count)
""",
        lambda rng: f"{ri(rng, 1, 10**4 if rng.random() < 0.5 else 120)} {ri(rng, 0, 9)}",
        [("13 1", "6")], edges=["10 0", "1 1"],
    ),
    problem(
        "fizzbuzz", "Fizz buzz", 1, "train",
        """For every integer i from 1 to n print one line: Fizz if i is divisible by 3 but not by 5, Buzz if it is
divisible by 5 but not by 3, FizzBuzz if it is divisible by both, and the number itself otherwise.

Input: one integer n (1 <= n <= 100).
Output: n lines.""",
        """
n = int(input())
for i in range(1, n + 1):
    if i % 15 == 0:
        print("FizzBuzz")
    elif i % 3 == 0:
        print("Fizz")
    elif i % 5 == 0:
        print("Buzz")
    else:
        print(i)
""",
        lambda rng: str(ri(rng, 1, 100)),
        [("5", "1\n2\nFizz\n4\nBuzz")], edges=["15"],
    ),
    problem(
        "second_largest", "Second largest value", 1, "val",
        """Print the second largest distinct value among n integers, or NONE if all values are equal.

Input: the first line holds n (1 <= n <= 1000); the second line holds n integers between -1000 and 1000.
Output: the second largest distinct value, or NONE.""",
        """
n = int(input())
a = list(map(int, input().split()))
first = max(a)
second = None
for x in a:
    if x < first and (second is None or x > second):
        second = x
print("NONE" if second is None else second)
""",
        lambda rng: sized_list(rng, 1000, -5 if rng.random() < 0.5 else -1000, 5 if rng.random() < 0.5 else 1000),
        [("5\n4 9 9 2 7", "7")], edges=["3\n5 5 5", "1\n-4"],
    ),
    problem(
        "dedupe", "Remove repeated values", 1, "test",
        """Print the distinct values of a list in the order of their first appearance.

Input: the first line holds n (1 <= n <= 1000); the second line holds n integers between -100 and 100.
Output: the distinct values on one line, separated by spaces.""",
        """
n = int(input())
a = list(map(int, input().split()))
out = []
for i in range(n):
    first = True
    for j in range(i):
        if a[j] == a[i]:
            first = False
            break
    if first:
        out.append(a[i])
print(" ".join(map(str, out)))
""",
        lambda rng: sized_list(rng, 300, -5 if rng.random() < 0.5 else -100, 5 if rng.random() < 0.5 else 100),
        [("6\n3 1 3 2 1 5", "3 1 2 5")], edges=["1\n0"],
    ),
]
