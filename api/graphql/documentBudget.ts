import { DocumentNode, FragmentDefinitionNode, GraphQLError, Kind, SelectionSetNode } from 'graphql';

/**
 * Limits a GraphQL document must meet before anything else looks at it. The depth and cost rules
 * (graphql-depth-limit, graphql-query-complexity) and graphql-js's own rules walk fragment spreads
 * anew at every spread and compare same-named fields pairwise, so a document of a few hundred bytes
 * whose fragments each spread the one before twice took seconds to minutes of the event loop, and
 * thousands of repeated directives took seconds too. These checks are linear in the document: the
 * text is measured and scanned before the parser sees it (the parser recurses once per level, so a
 * deep enough text overflowed the stack), and the parsed document is measured with each fragment
 * counted once (memoised) before validation.
 */

/** Longest query text accepted (characters). An application's operations are a few KB. */
export const MAX_QUERY_LENGTH = 16 * 1024;
/**
 * Deepest nesting of braces, brackets and parentheses in the text. The depth rule refuses a
 * selection deeper than 10 with its own error; this only keeps the parser's recursion bounded.
 */
export const MAX_TEXT_NESTING = 64;
/** Most fields the operation selects with every fragment spread expanded (aliases included). */
export const MAX_SELECTIONS = 2_000;
/** Most directives in the document. */
export const MAX_DIRECTIVES = 100;

const refusal = (message: string, extensions: Record<string, unknown>) =>
  new GraphQLError(message, undefined, undefined, undefined, undefined, undefined, {
    code: 'QUERY_TOO_LARGE',
    status: 400,
    ...extensions,
  });

/** The text's refusal (too long, nested too deep), if any: checked before parsing. */
export function textRefusal(query: string): GraphQLError | undefined {
  if (query.length > MAX_QUERY_LENGTH)
    return refusal(`query: longer than ${MAX_QUERY_LENGTH} characters`, { maximumLength: MAX_QUERY_LENGTH });
  let depth = 0;
  for (let i = 0; i < query.length; i++) {
    const c = query.charCodeAt(i);
    if (c === 0x7b || c === 0x28 || c === 0x5b) {
      // { ( [
      if (++depth > MAX_TEXT_NESTING)
        return refusal(`query: nested deeper than ${MAX_TEXT_NESTING} levels`, { maximumNesting: MAX_TEXT_NESTING });
    } else if (c === 0x7d || c === 0x29 || c === 0x5d) {
      depth--;
    } else if (c === 0x23) {
      // A comment runs to the end of the line.
      while (i < query.length && query.charCodeAt(i) !== 0x0a && query.charCodeAt(i) !== 0x0d) i++;
    } else if (c === 0x22) {
      // A string ("…" or """…"""): its braces are text.
      const block = query.startsWith('"""', i);
      i += block ? 3 : 1;
      while (i < query.length) {
        const d = query.charCodeAt(i);
        if (d === 0x5c) i += 2;
        else if (block ? query.startsWith('"""', i) : d === 0x22) {
          if (block) i += 2;
          break;
        } else if (!block && (d === 0x0a || d === 0x0d)) break;
        else i++;
      }
    }
  }
  return undefined;
}

/** The parsed document's refusal (too many fields once fragments are expanded, too many directives), if any. */
export function documentRefusal(document: DocumentNode): GraphQLError | undefined {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  // Fields of each fragment with its spreads expanded, computed once; a cycle counts 0 here and is
  // reported by validation (NoFragmentCyclesRule).
  const sizes = new Map<string, number>();
  const visiting = new Map<string, boolean>();
  let directives = 0;
  const cap = (n: number) => Math.min(n, MAX_SELECTIONS + 1);
  const fragmentSize = (name: string): number => {
    const known = sizes.get(name);
    if (known !== undefined) return known;
    const f = fragments.get(name);
    if (!f || visiting.get(name)) return 0;
    visiting.set(name, true);
    const n = setSize(f.selectionSet);
    visiting.set(name, false);
    sizes.set(name, n);
    return n;
  };
  const setSize = (set: SelectionSetNode | undefined): number => {
    if (!set) return 0;
    let n = 0;
    for (const s of set.selections) {
      directives += s.directives?.length ?? 0;
      if (s.kind === Kind.FIELD) n += 1 + setSize(s.selectionSet);
      else if (s.kind === Kind.INLINE_FRAGMENT) n += setSize(s.selectionSet);
      else n += fragmentSize(s.name.value);
      n = cap(n);
    }
    return n;
  };
  let total = 0;
  for (const d of document.definitions) {
    if (d.kind === Kind.OPERATION_DEFINITION) {
      directives += d.directives?.length ?? 0;
      total = cap(total + setSize(d.selectionSet));
    } else if (d.kind === Kind.FRAGMENT_DEFINITION) {
      directives += d.directives?.length ?? 0;
      fragmentSize(d.name.value);
    }
  }
  if (total > MAX_SELECTIONS)
    return refusal(`query: selects more than ${MAX_SELECTIONS} fields with its fragments expanded`, {
      maximumSelections: MAX_SELECTIONS,
    });
  if (directives > MAX_DIRECTIVES)
    return refusal(`query: more than ${MAX_DIRECTIVES} directives`, { maximumDirectives: MAX_DIRECTIVES });
  return undefined;
}
