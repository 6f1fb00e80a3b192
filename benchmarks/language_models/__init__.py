"""Language-model studies: our decoder-only and encoder-only models as GPT-2 and BERT would be used.

`against_keras_hub` races our language models against keras-hub's GPT-2 and BERT of the same size
(training tokens/s, MFU and cached generation, each library in its own worker process);
`pretraining` asks whether masked-LM pre-training pays where labels are scarce (fine-tuned, from
scratch and a linear probe, by label count). Run each as `python -m benchmarks.language_models.<study>`.
"""
