"""``inkstream`` command line: a registry of sub-commands, each a ``"module:function"`` taking argv.

Each command module parses its own arguments (argparse) and returns a process exit code, so adding a
command is one line here and one module elsewhere.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pathlib
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "up": ("launcher.up:main", "start gateway + encoder + decoder locally (Ctrl-C stops all)"),
    "ocr": ("client.ocr_cli:main", "OCR a document through a gateway (or a temporary local stack)"),
    "serve": ("inkstream.serve:main", "run one service: serve encoder|decoder|gateway ..."),
    "eval": ("evaluation.run:main", "CER/WER of a folder of documents with ground truth"),
    "make-tiny-checkpoint": ("models.deepseek_ocr2.tiny:main", "write a tiny random deepseek_ocr2 checkpoint"),
    "export-vllm": ("models.deepseek_ocr2.vllm_export:main",
                    "export a deepseek_ocr2 checkpoint's language model for the decoder's vllm engine"),
    "train-compact": ("training.compact.train:main", "train the embedded compact model (resumable)"),
    "train-compact-zh": ("training.compact.train_zh:main",
                         "train the bilingual Chinese + Latin compact checkpoint on the PP-OCRv6 tower (resumable)"),
}


def version() -> str:
    """The installed distribution's version (``pyproject.toml``), or ``unknown`` outside an install."""
    try:
        return importlib.metadata.version("inkstream")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _usage() -> str:
    width = max(len(n) for n in COMMANDS)
    rows = "\n".join(f"  {n.ljust(width)}  {h}" for n, (_, h) in COMMANDS.items())
    return (f"usage: inkstream [--version] COMMAND [ARGS...]\n\ncommands:\n{rows}\n\n"
            "'inkstream COMMAND --help' for a command's options.")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``inkstream`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if argv[0] in ("-V", "--version", "version"):
        print(f"inkstream {version()}")
        return 0
    if argv[0] not in COMMANDS:
        print(f"inkstream: unknown command {argv[0]!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module, _, func = COMMANDS[argv[0]][0].partition(":")
    try:
        entry = getattr(_import_command(module), func)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module == exc.name or module.startswith(exc.name + ".")):
            print(f"inkstream {argv[0]}: module {module} is not installed; it ships with a checkout of the "
                  "repository only (run the command from the repository's root)", file=sys.stderr)
            return 2
        raise
    return int(entry(argv[1:]) or 0)


def _import_command(module: str):
    """Import a command's module. The training commands' package (``training/``) is not installed with
    the distribution: it is found in the working directory when that is a checkout's root, appended
    to ``sys.path`` (after the installed packages, so nothing installed is shadowed). Raises
    ModuleNotFoundError when it is not there either.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.partition(".")[0]
        here = pathlib.Path.cwd()
        if exc.name != top or not (here / top / "__init__.py").is_file() or str(here) in sys.path:
            raise
        sys.path.append(str(here))
        return importlib.import_module(module)


if __name__ == "__main__":
    sys.exit(main())
