/** The part of ggencoder (GeoGate AIS decoder, no bundled types) that the AIS ingestion uses. */
declare module 'ggencoder' {
  export class AisDecode {
    constructor(sentence: string, session?: Record<string, unknown>);
    valid: boolean;
    error: string;
    aistype?: number;
    immsi?: number;
    navstatus?: number;
    lat?: number;
    lon?: number;
    sog?: number;
    cog?: number;
    hdg?: number;
    shipname?: string;
    cargo?: number;
    dimA?: number;
    dimB?: number;
    dimC?: number;
    dimD?: number;
    part?: number;
  }
  /** Encoder: used by tests and benchmarks to make varied traffic. */
  export class AisEncode {
    constructor(msg: Record<string, unknown>);
    valid: boolean;
    nmea: string;
  }
}
