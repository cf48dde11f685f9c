// No layer at all.
module {
}
