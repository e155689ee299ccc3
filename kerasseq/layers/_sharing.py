"""Layers shared between kerasseq layers (an embedding passed as `embedding=`)."""

import keras


def serialize_shared_layer(layer):
    """The config of a layer that several layers hold, marked as one object.

    Keras' `.keras` saving gives an object serialized twice a
    `shared_object_id` and loads it once. It marks the first copy after the
    fact, on a dict that an enclosing layer's config has already copied, so
    the first user of the layer would load its own copy. Marking every copy
    with the layer's id up front makes every use load the same object; outside
    a save (`from_config(get_config())`, `clone_model`) the mark is ignored and
    each config builds a layer of its own.
    """
    config = keras.saving.serialize_keras_object(layer)
    config["shared_object_id"] = id(layer)
    return config


def deserialize_shared_layer(config):
    """A layer or its config (from `serialize_shared_layer`) → the layer."""
    if isinstance(config, dict):
        return keras.saving.deserialize_keras_object(config)
    return config
