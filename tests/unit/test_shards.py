"""Hash shards: Kubernetes 1.36's FNV-1a of metadata.uid and [start, end) ranges, split evenly."""

from __future__ import annotations

import itertools
import uuid

from helmop.api.shards import EVERYTHING, NOTHING, SPACE, Range, fnv1a64, hash_of, share


def test_the_hash_is_64_bit_fnv_1a() -> None:
    # the reference vectors of the FNV specification
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8


def test_members_split_the_space_into_equal_contiguous_ranges() -> None:
    members = ["c", "a", "b"]
    ranges = [share(members, m) for m in ("a", "b", "c")]
    assert ranges[0].start == 0 and ranges[-1].end == SPACE
    assert all(x.end == y.start for x, y in itertools.pairwise(ranges))
    assert share(members, "d") == NOTHING and share(["a"], "a") == EVERYTHING
    uids = [str(uuid.uuid4()) for _ in range(3000)]
    counts = [sum(hash_of(u) in r for u in uids) for r in ranges]
    assert sum(counts) == 3000 and all(abs(c - 1000) < 150 for c in counts)  # 1000 +- 18 is one sigma


def test_ranges_say_themselves_as_a_shard_selector() -> None:
    last = share(["a", "b"], "b")
    assert last.selector() == "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
    assert Range.parse(last.selector()) == last and NOTHING.selector() == ""
    for junk in ("", "shardRange(object.metadata.namespace, '0x0', '0x1')", "shardRange(object.metadata.uid, 'x', 'y')",
                 "shardRange(object.metadata.uid, '0x5', '0x1')"):
        assert Range.parse(junk) == NOTHING


def test_what_stays_of_a_range_and_what_overlaps() -> None:
    a, b = Range(0, 10), Range(5, 20)
    assert a.within(b) == Range(5, 10) and a.within(Range(10, 20)) == NOTHING
    assert a.overlaps(b) and not a.overlaps(Range(10, 20)) and not NOTHING.overlaps(a)
    assert 0 in a and 10 not in a and 9 in a
