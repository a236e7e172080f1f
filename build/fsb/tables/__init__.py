"""Raw files -> validated tables, the first stage of the data flow: the generations (FSB_text.csv or a
`fsb generate` JSONL file), the individual best-worst judgments (`Item1..ItemK,BestItem,WorstItem[,Annotator]`),
a study's item list, any CSV with line numbers, and the one id rule (`csvrows.id_problem`).

Every refusal is an `InputError` naming the file, the line (header = line 1) and the field, and it is always
the FIRST offending line of the file, whatever the column or the kind of check. Imports only fsb.core.
"""
