"""Train the Transformer: `python train.py` trains the small preset on the built-in corpus.

It also evaluates the model and exports it. `python train.py --help` lists every flag.
"""

import sys

from keras_transformer.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]], own_process=True))
