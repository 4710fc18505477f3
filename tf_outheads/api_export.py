"""Registration of the library's public Keras objects.

Every layer, loss and model the library exposes is registered once, under the
package name ``tf_outheads``, so that `.keras` files load with
``safe_mode=True`` and without ``custom_objects`` (keras-hub ``api_export.py``).
"""

import keras

PACKAGE = "tf_outheads"


def export(cls):
    """Class decorator: register ``cls`` as serializable under ``tf_outheads``."""
    return keras.saving.register_keras_serializable(package=PACKAGE)(cls)
