-- Every scalar type, NOT NULL and nullable, arrays, a generated column, commit timestamps and a
-- DESC key part.
CREATE TABLE AllTypes (
  Id          STRING(36)   NOT NULL,
  Seq         INT64        NOT NULL,
  B           BOOL         NOT NULL,
  NB          BOOL,
  I           INT64        NOT NULL,
  NI          INT64,
  F32         FLOAT32      NOT NULL,
  NF32        FLOAT32,
  F           FLOAT64      NOT NULL,
  NF          FLOAT64,
  S           STRING(MAX)  NOT NULL,
  NS          STRING(10),
  Bs          BYTES(MAX)   NOT NULL,
  NBs         BYTES(16),
  D           DATE         NOT NULL,
  ND          DATE,
  T           TIMESTAMP    NOT NULL,
  NT          TIMESTAMP,
  N           NUMERIC      NOT NULL,
  NN          NUMERIC,
  J           JSON         NOT NULL,
  NJ          JSON,
  AS_         ARRAY<STRING(MAX)>,
  AI          ARRAY<INT64> NOT NULL,
  AB          ARRAY<BYTES(MAX)>,
  ATs         ARRAY<TIMESTAMP>,
  SLen        INT64 AS (CHAR_LENGTH(S)) STORED,
  CreatedAt   TIMESTAMP    NOT NULL OPTIONS (allow_commit_timestamp = true),
  DeletedAt   TIMESTAMP    OPTIONS (allow_commit_timestamp = true),
) PRIMARY KEY (Id, Seq DESC);

-- Covers every column it is asked for: a single read.
CREATE INDEX AllTypesByS ON AllTypes (S DESC) STORING (B, NB, I, NI, F32, NF32, F, NF, NS, Bs, NBs, D, ND, T, NT, N, NN, J, NJ, AS_, AI, AB, ATs, SLen, CreatedAt, DeletedAt);
