//! The simulated model's output text: one common English word per token.

/// Each word, with its leading space, is exactly one token in OpenAI's o200k_base and
/// cl100k_base, and BPE pre-tokenisation splits text at these spaces, so a client that
/// re-tokenises the output counts exactly the tokens the server generated.
pub const WORDS: [&str; 32] = [
    " the", " of", " and", " to", " in", " is", " that", " it", " for", " on", " with", " as",
    " was", " at", " by", " be", " this", " are", " from", " or", " have", " an", " not", " but",
    " you", " all", " can", " we", " they", " one", " more", " which",
];

/// Appends the text of output tokens `first..first + count` of a request whose words start
/// at `seed` (so concurrent requests do not all say the same thing).
pub fn push_tokens(out: &mut String, seed: u64, first: usize, count: usize) {
    for i in first..first + count {
        let index = (seed as usize).wrapping_add(i) % WORDS.len();
        out.push_str(WORDS[index]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_has_one_word_per_token() {
        let mut s = String::new();
        push_tokens(&mut s, 7, 0, 100);
        assert_eq!(s.split(' ').skip(1).count(), 100);
        assert!(s.starts_with(" it for"), "{s}");
    }

    #[test]
    fn every_word_is_one_openai_token() {
        let mut text = String::new();
        push_tokens(&mut text, 0, 0, 3 * WORDS.len());
        for bpe in [tiktoken_rs::o200k_base(), tiktoken_rs::cl100k_base()] {
            let bpe = bpe.expect("bundled tiktoken vocabulary");
            for word in WORDS {
                assert_eq!(bpe.encode_ordinary(word).len(), 1, "{word:?}");
            }
            assert_eq!(bpe.encode_ordinary(&text).len(), 3 * WORDS.len());
        }
    }
}
