"""Layers shared between kerasseq layers (an embedding passed as `embedding=`),
and Keras' object sharing kept away from copies a layer makes for itself."""

import contextlib

import keras
from keras.src.backend.common import global_state

# The two maps of Keras' `ObjectSharingScope` (keras.src.saving.serialization_lib),
# which `keras.models.load_model` and `.keras` saving open; nothing public
# reads or suspends them.
_SHARING_MAPS = ("shared_objects/id_to_obj_map", "shared_objects/id_to_config_map")


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


@contextlib.contextmanager
def outside_object_sharing():
    """Suspend Keras' object-sharing scope, if one is open, for a block.

    Inside the scope (`keras.models.load_model`, `.keras` saving) Keras records
    every object it serializes or deserializes under `id(obj)`, and an object
    serialized under an id seen before loads as the object recorded then.
    `keras.layers.Bidirectional(lstm)` copies `lstm` through
    serialize/deserialize (twice); built in a layer's `__init__` during a load,
    the throwaway `lstm` is recorded, freed, and a later throwaway at the same
    address loads as an earlier encoder's LSTM ("Forward layer and backward
    layer should have different go_backwards value", or one LSTM in two
    encoders). Such copies are no part of the file: build them in this block,
    which the scope neither sees nor answers. The maps are thread-local.
    """
    saved = [global_state.get_global_attribute(name) for name in _SHARING_MAPS]
    for name in _SHARING_MAPS:
        global_state.set_global_attribute(name, None)
    try:
        yield
    finally:
        for name, value in zip(_SHARING_MAPS, saved, strict=True):
            global_state.set_global_attribute(name, value)
