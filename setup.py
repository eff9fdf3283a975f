"""Build hook: generate the gRPC stubs from protos/ before setuptools looks for packages.

The stubs (``inkstream.{common,encoder,decoder,gateway}.v1``) are generated, never committed; they
must exist before ``setup()`` runs, because package discovery happens before ``build_py``.
"""

import pathlib
import sys

from setuptools import setup

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from inkstream import _protogen

_protogen.generate(force=True)

setup()
