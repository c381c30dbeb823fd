"""A model of a JSON record that a job stores and serves: read and written back as it was, keys and their order.

A record written by an earlier release, or with keys a later one added, must come back out unchanged: the model
keeps the keys it does not name (``extra="allow"``), writes only the keys it was given (none of its defaults) and
writes them in the order they came in, a key set later after them.

Usage::

    class Outcome(JsonRecord):
        returned: int | None = None

    Outcome.model_validate({"took_ms": 3.5, "returned": 2}).dump()   # {"took_ms": 3.5, "returned": 2}
    Outcome(returned=1).dump()                                       # {"returned": 1}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)


class JsonRecord(BaseModel):
    """A record of named fields and whatever else it was written with; ``dump`` is the JSON it was."""

    model_config = ConfigDict(extra="allow")

    # The order the keys came in: written back in it.
    _order: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _keeps_order(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Self:
        record = handler(data)
        if isinstance(data, Mapping):
            record._order = list(data)
        return record

    @model_serializer(mode="wrap")
    def _in_order(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        first = {key: data[key] for key in self._order if key in data}
        return {**first, **{key: value for key, value in data.items() if key not in first}}

    def dump(self) -> dict[str, Any]:
        """The record as JSON: the keys it was given, in their order, none of the defaults it was not."""
        return self.model_dump(mode="json", exclude_unset=True)
