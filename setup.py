"""Build hook: generate the gRPC stubs from protos/ during build_py (never committed)."""

import pathlib
import sys

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithProtos(build_py):
    def run(self):
        sys.path.insert(0, str(pathlib.Path(__file__).parent))
        from inkstream import _protogen

        _protogen.generate(force=True)  # into the source tree; packaged from there
        super().run()


setup(cmdclass={"build_py": BuildWithProtos})
