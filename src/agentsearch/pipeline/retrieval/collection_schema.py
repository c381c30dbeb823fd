"""The Milvus schema of a collection's chunks: text, vectors, the BM25 function and the plain fields filters read.

Fields a collection made earlier lacks (``sentences``, ``access_groups``, ``metadata_terms``, ``published_day``)
are written only where the collection has them (``VectorStore.fields``); ``agentsearch reindex`` rebuilds a
collection with this schema.

Usage::

    create_collection(MilvusClient("http://127.0.0.1:19530"), "c_ab12_g1", dimension=384)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentsearch.pipeline.retrieval.access_field import ACCESS_FIELD, ACCESS_FIELD_CHARS
from agentsearch.pipeline.retrieval.metadata_index import DAY_FIELD, TERMS_FIELD, TERMS_FIELD_CHARS

if TYPE_CHECKING:
    from pymilvus import MilvusClient

SENTENCES_FIELD = "sentences"


def create_collection(client: MilvusClient, name: str, dimension: int, plain_fields: bool = True) -> None:
    """One Milvus collection ``name`` with the current schema, its vector indexes made; without ``plain_fields``,
    as collections were made before the sentences' and the filters' fields (what tests of old collections need)."""
    # Here, not above: pymilvus imports pandas, and the API's start-up never makes a collection.
    from pymilvus import DataType, Function, FunctionType, MilvusClient

    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=512)
    schema.add_field("document_id", DataType.VARCHAR, max_length=512)
    schema.add_field("title", DataType.VARCHAR, max_length=2048)
    schema.add_field("text", DataType.VARCHAR, max_length=65535)
    schema.add_field("keywords", DataType.VARCHAR, max_length=65535, enable_analyzer=True,
                     analyzer_params={"type": "standard"})
    schema.add_field("metadata", DataType.JSON)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dimension)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    if plain_fields:
        schema.add_field(SENTENCES_FIELD, DataType.VARCHAR, max_length=65535)
        schema.add_field(ACCESS_FIELD, DataType.VARCHAR, max_length=ACCESS_FIELD_CHARS)
        # The metadata filters users write most, on plain columns (agentsearch.pipeline.retrieval.metadata_index).
        schema.add_field(TERMS_FIELD, DataType.VARCHAR, max_length=TERMS_FIELD_CHARS)
        schema.add_field(DAY_FIELD, DataType.INT64)
    schema.add_function(
        Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["keywords"],
                 output_field_names=["sparse"])
    )
    index = client.prepare_index_params()
    index.add_index(field_name="vector", index_type="AUTOINDEX", metric_type="COSINE")
    index.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
