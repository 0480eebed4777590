"""When an existing image may stand in for a build (host/images.py: stands_in, _find_current).

An image's tag names its content (lock, bench/ sources), not the commit it was built from. Pods
and compose runs record the commit the image has baked in (KIT_IMAGE_GIT_SHA), so an image built
from a copy without .git (no commit) must not stand in for a build from a checkout that knows its
commit: its cells would record no kit_git_sha. A checkout without git reuses any image of its
content. The engine is faked at its one boundary: the look-up of an image by tag.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from host import images

REF = "cnn-bench/cpu:283c6599a400-940924c52358"
WANT = {
    "cnn-bench.lock-hash": "283c6599a400" + "0" * 52,
    "cnn-bench.source-hash": "940924c52358" + "1" * 52,
    "org.opencontainers.image.base.digest": "sha256:" + "2" * 64,
}
SHA_A = "a69239f117b4d4254970c80b00b5e8feb9b30a43"
SHA_B = "0123456789abcdef0123456789abcdef01234567"
ABSENT = object()  # the image's environment has no KIT_IMAGE_GIT_SHA at all


def fake_image(commit=ABSENT, labels: dict | None = None, ref: str = REF) -> SimpleNamespace:
    """What the docker SDK's Image offers that the decision reads: id, tags, labels, attrs' Env."""
    env = ["PATH=/opt/venv/bin:/usr/bin", "KIT_PLATFORM=cpu"]
    if commit is not ABSENT:
        env.append(f"KIT_IMAGE_GIT_SHA={'' if commit is None else commit}")
    labels = dict(WANT if labels is None else labels)
    return SimpleNamespace(
        id="sha256:" + "9" * 64,
        tags=[ref],
        labels=labels,
        attrs={"Config": {"Env": env, "Labels": labels}, "RepoDigests": []},
    )


def engine_with(*imgs: SimpleNamespace):
    """GET_IMAGE for _find_current: the image tagged REF, None for any other tag."""
    by_tag = {t: img for img in imgs for t in img.tags}
    return by_tag.get


def find(img, checkout_commit, said: list[str] | None = None):
    return images._find_current(REF, WANT, checkout_commit, (said if said is not None else []).append, engine_with(img))


# ---- the cases of the defect -----------------------------------------------------------


@pytest.mark.parametrize("image_commit", [None, "", "unknown", ABSENT])
def test_an_image_without_a_commit_is_rebuilt_for_a_checkout_that_knows_its_commit(image_commit) -> None:
    said: list[str] = []
    assert find(fake_image(image_commit), SHA_A, said) is None
    assert said and "records no git commit" in said[0] and SHA_A in said[0], said


@pytest.mark.parametrize("image_commit", [None, "unknown", SHA_A])
def test_a_checkout_without_git_reuses_any_image_of_its_content(image_commit) -> None:
    img = fake_image(image_commit)
    for checkout_commit in (None, "", "unknown"):
        assert find(img, checkout_commit) is img


def test_an_image_from_another_commit_of_the_same_content_stands_in() -> None:
    img = fake_image(SHA_A)
    assert find(img, SHA_B) is img
    assert find(fake_image(SHA_A + "-dirty"), SHA_B) is not None


def test_other_content_never_stands_in_and_says_nothing() -> None:
    for key in WANT:
        said: list[str] = []
        assert find(fake_image(SHA_A, labels={**WANT, key: "other"}), SHA_A, said) is None
        assert find(fake_image(None, labels={**WANT, key: "other"}), SHA_A, said) is None
        assert said == []


def test_no_image_under_the_tag_is_a_build() -> None:
    assert images._find_current(REF, WANT, SHA_A, [].append, engine_with()) is None


def test_recorded_commit_reads_the_images_environment() -> None:
    assert images.recorded_commit(fake_image(SHA_A)) == SHA_A
    assert images.recorded_commit(fake_image("")) is None
    assert images.recorded_commit(fake_image("unknown")) is None
    assert images.recorded_commit(fake_image(ABSENT)) is None
    assert images.recorded_commit(SimpleNamespace(attrs={})) is None


# ---- the rule over every combination ----------------------------------------------------

sha = st.text("0123456789abcdef", min_size=40, max_size=40)
image_commits = st.one_of(st.just(ABSENT), st.sampled_from([None, "", "unknown"]), sha, sha.map(lambda s: s + "-dirty"))
checkout_commits = st.one_of(st.sampled_from([None, "", "unknown"]), sha, sha.map(lambda s: s + "-dirty"))


@given(
    image_commit=image_commits, checkout_commit=checkout_commits, same_content=st.booleans(), key=st.sampled_from(sorted(WANT))
)
def test_the_reuse_rule(image_commit, checkout_commit, same_content: bool, key: str) -> None:
    labels = dict(WANT) if same_content else {**WANT, key: "x" + WANT[key][1:]}
    img = fake_image(image_commit, labels=labels)
    got = find(img, checkout_commit)
    image_knows = image_commit not in (ABSENT, None, "", "unknown")
    checkout_knows = checkout_commit not in (None, "", "unknown")
    assert (got is img) == (same_content and (image_knows or not checkout_knows))
    assert images.stands_in(labels, WANT, None if image_commit is ABSENT else image_commit, checkout_commit) == (got is img)
    if got is not None and checkout_knows:  # the cells it runs (pods, compose) record a commit
        assert images.recorded_commit(got) is not None


# ---- build() with the engine faked: what `orchestrate.py build cpu` does -------------------


class _BuildStarted(Exception):
    pass


@pytest.mark.parametrize(
    ("image_commit", "checkout_commit", "rebuilt"),
    [(None, SHA_A, True), ("unknown", SHA_A, True), (SHA_A, SHA_A, False), (SHA_A, SHA_B, False), (None, "unknown", False)],
)
def test_build_rebuilds_an_image_without_a_commit_for_a_git_checkout(
    monkeypatch: pytest.MonkeyPatch, image_commit, checkout_commit, rebuilt: bool
) -> None:
    """build() runs `docker build` (faked: build_cli raises) for the no-commit image from a git
    checkout, and returns the existing image's id otherwise."""
    base = SimpleNamespace(id="sha256:" + "3" * 64, tags=["base:x"], attrs={"RepoDigests": ["base@sha256:" + "4" * 64]})
    want = {
        "cnn-bench.lock-hash": images.lock_hash("cpu"),
        "cnn-bench.source-hash": images.source_hash(),
        "org.opencontainers.image.base.digest": "sha256:" + "4" * 64,
    }
    kit = fake_image(image_commit, labels=want, ref=images.image_ref("cpu"))

    def get(ref: str):
        found = {"base:x": base, kit.tags[0]: kit}.get(ref)
        if found is None:
            raise LookupError(ref)  # the SDK's ImageNotFound
        return found

    def no_build():
        raise _BuildStarted

    monkeypatch.setattr(images, "docker_client", lambda *a, **k: SimpleNamespace(images=SimpleNamespace(get=get)))
    monkeypatch.setattr(images, "build_cli", no_build)
    monkeypatch.setattr(images, "git_sha", lambda: checkout_commit)
    said: list[str] = []
    if rebuilt:
        with pytest.raises(_BuildStarted):
            images.build("cpu", base_image="base:x", echo=said.append, tag_latest=False, prune=False)
    else:
        assert images.build("cpu", base_image="base:x", echo=said.append, tag_latest=False, prune=False) == kit.id
        assert any("up to date" in s for s in said), said
