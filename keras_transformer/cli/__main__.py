"""`python -m keras_transformer.cli ...`: the command line."""

import sys

from keras_transformer.cli import run

sys.exit(run())
