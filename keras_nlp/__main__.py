import sys

from keras_nlp.cli import main

sys.exit(main())
